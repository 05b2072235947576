"""The job view's loop without a TUI: read the job every interval, judge it, print a line (or
a JSON object) and record it; the TUI runs the same ``refresh`` (tui.py)."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import IO, Protocol

from .figures import JobSample, SourceError
from .judge import JobHistory
from .view import JobView, headline_line, node_lines, rank_lines, to_json


class Source(Protocol):
    """Where the job is read from: the nodes' exporters, or a Prometheus server."""

    def sample(self) -> JobSample: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class JobWatch:
    """A source and the history judged over it; ``refresh`` reads, judges and records."""

    def __init__(self, source: Source, history: JobHistory, record: Path | None = None) -> None:
        self.source = source
        self.history = history
        self._record: IO[str] | None = None
        if record is not None:
            record.parent.mkdir(parents=True, exist_ok=True)
            self._record = record.open("a", encoding="utf-8")

    def backfill(self) -> None:
        """Where the source keeps history (Prometheus), the windows before now, so the first
        verdict needs no wait."""
        past = getattr(self.source, "past", None)
        if past is not None:
            for sample in past(self.history.window_s):
                self.history.add(sample)

    def refresh(self) -> JobView:
        """One read of the job, judged; SourceError where nothing could be read."""
        self.history.add(self.source.sample())
        view = self.history.view(self.source.describe())
        if self._record is not None:
            self._record.write(json.dumps(to_json(view)) + "\n")
            self._record.flush()
        return view

    def close(self) -> None:
        self.source.close()
        if self._record is not None:
            self._record.close()


def run_headless(
    watch: JobWatch,
    interval: float,
    json_lines: bool,
    detail: str,
    count: int | None,
    out: IO[str] | None = None,
) -> int:
    """A line (or JSON object) per interval until Ctrl+C or ``count`` lines; ``detail``:
    "nodes" adds a line per node, "ranks" a line per rank too."""
    out = out or sys.stdout
    stop = threading.Event()
    printed = 0
    with contextlib.suppress(KeyboardInterrupt):
        watch.backfill()
        while count is None or printed < count:
            try:
                view = watch.refresh()
            except SourceError as error:
                print(f"gputop-train job: {error}", file=sys.stderr, flush=True)
            else:
                lines = [json.dumps(to_json(view))] if json_lines else _text(view, detail)
                try:
                    print("\n".join(lines), file=out, flush=True)
                except BrokenPipeError:
                    return 0
                printed += 1
            if count is None or printed < count:
                stop.wait(interval)
    return 0


def _text(view: JobView, detail: str) -> list[str]:
    lines = [headline_line(view)]
    if detail in ("nodes", "ranks"):
        lines += node_lines(view)
    if detail == "ranks":
        lines += rank_lines(view)
    return lines
