"""The job's output log: the job writes straight to a file, the TUI tails it.

Writing to a file rather than a pipe means the job never gets SIGPIPE when the monitor exits,
so "leave it running" on quit (or an SSH drop) is safe.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

# How much of the log the TUI keeps in memory (the file keeps everything).
TAIL_LINES = 2000


class LogTail:
    """Reads new complete lines from a growing file; never blocks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)

    def read_new(self) -> list[str]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        new = [line.decode(errors="replace").rstrip("\r") for line in complete]
        self.lines.extend(new)
        return new

    def last(self, count: int) -> tuple[str, ...]:
        return tuple(list(self.lines)[-count:])
