"""``gputop-train report``: a recording into one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

from ..record.files import write_private
from .load import Run, load
from .needs import require


def default_output(recording: Path) -> Path:
    return recording.with_suffix(".report.html")


def write_report(recording: Path, output: Path | None = None) -> tuple[Path, Run]:
    """Load, draw and write; returns where, and the run. ``needs.MissingPlotting`` when
    matplotlib is not installed (said before the recording is read)."""
    require()
    from .page import render  # numpy and matplotlib: only once they are known to be there

    run = load(recording)
    target = output or default_output(recording)
    write_private(target, render(run))
    return target, run
