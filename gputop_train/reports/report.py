"""``gputop-train report``: a recording into one self-contained HTML file."""

from __future__ import annotations

import os
from pathlib import Path

from ..record.files import describe_os_error, write_private
from .load import Run, load
from .needs import require


class ReportPlaceError(ValueError):
    """The report cannot be written where it was asked to; the message says why."""


def default_output(recording: Path) -> Path:
    return recording.with_suffix(".report.html")


def report_place(recording: Path, output: Path | None) -> Path:
    """Where the report goes: ``output``, or inside it where it is a directory, or beside the
    recording. Checked before the recording is read (a long one takes a while)."""
    target = output or default_output(recording)
    if target.is_dir():
        target = target / default_output(recording).name
    if target.is_dir() or (target.exists() and not target.is_file()):
        raise ReportPlaceError(f"{target} is not a regular file; give a file name for the report")
    parent = target.parent
    if not parent.is_dir():
        raise ReportPlaceError(f"no directory {parent} for {target}; create it or choose another")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ReportPlaceError(f"{parent} is not writable by you; write the report elsewhere (-o)")
    return target


def write_report(recording: Path, output: Path | None = None) -> tuple[Path, Run]:
    """Load, draw and write; returns where, and the run. ``needs.MissingPlotting`` when
    matplotlib is not installed (said before the recording is read); ``ReportPlaceError`` where
    it cannot be written, named by its own path (never the temporary file's)."""
    require()
    from .page import render  # numpy and matplotlib: only once they are known to be there

    target = report_place(recording, output)
    run = load(recording)
    try:
        write_private(target, render(run))
    except OSError as error:
        raise ReportPlaceError(
            f"cannot write the report, {describe_os_error(error, target)}; choose another "
            "place with -o"
        ) from error
    return target, run
