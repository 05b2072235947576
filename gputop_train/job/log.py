"""The job's output log: the job writes straight to a file, the TUI tails it.

Writing to a file rather than a pipe means the job never gets SIGPIPE when the monitor exits,
so "leave it running" on quit (or an SSH drop) is safe.

The monitor's memory never follows the log's size: each read takes at most ``READ_BYTES``
(a log that grew by more is skipped to its last ``READ_BYTES``, saying how much was skipped),
a line is cut at ``MAX_LINE_CHARS``, and a carriage return (a progress bar redrawing its
line, as tqdm does) replaces the line rather than adding to it. The file keeps everything.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

# How much of the log the TUI keeps in memory (the file keeps everything).
TAIL_LINES = 2000
# The most one read takes: 2,000 lines of 500 characters. A 1 GiB log took the monitor to
# 3-4 GB when read whole (issue 31, 2026-11-24); its tail is what a screen shows anyway.
READ_BYTES = 1024 * 1024
# A line longer than this is cut (the rest up to its newline is dropped): no screen shows
# more, and a stream without newlines grew the monitor by 200 MB a minute (issue 31).
MAX_LINE_CHARS = 4096
_CUT = " [… cut: the log file has the whole line]"


class LogTail:
    """Reads new complete lines from a growing file; never blocks, never holds more than
    ``READ_BYTES`` of it at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""  # the line being written: its last carriage-return segment
        self._cutting = False  # inside an over-long line: drop up to its newline
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)
        self.skipped_bytes = 0  # skipped to keep up with a log growing faster than it is read

    def read_new(self) -> list[str]:
        """The lines completed since the last call (a note first, if some were skipped)."""
        try:
            with self.path.open("rb") as handle:
                size = handle.seek(0, 2)
                new: list[str] = []
                if size - self._offset > READ_BYTES:
                    skipped = size - READ_BYTES - self._offset
                    self.skipped_bytes += skipped
                    self._offset = size - READ_BYTES
                    self._partial, self._cutting = "", True  # resume at the next line
                    new.append(f"[gputop-train: {skipped:,} bytes skipped: see {self.path}]")
                handle.seek(self._offset)
                data = handle.read(READ_BYTES)
        except (FileNotFoundError, IsADirectoryError):
            return []
        self._offset += len(data)
        new.extend(self._lines_of(data.decode(errors="replace")))
        self.lines.extend(new)
        return new

    def _lines_of(self, text: str) -> list[str]:
        *complete, rest = text.split("\n")
        lines = []
        for piece in complete:
            if self._cutting:
                self._cutting = False
                continue
            lines.append(self._bounded(_last_redraw(self._partial + piece), cut=False))
            self._partial = ""
        if not self._cutting:
            self._partial = _last_redraw(self._partial + rest)
            if len(self._partial) > MAX_LINE_CHARS:
                lines.append(self._bounded(self._partial, cut=True))
                self._partial, self._cutting = "", True
        return lines

    @staticmethod
    def _bounded(line: str, cut: bool) -> str:
        if cut or len(line) > MAX_LINE_CHARS:
            return line[:MAX_LINE_CHARS] + _CUT
        return line

    def last(self, count: int) -> tuple[str, ...]:
        return tuple(list(self.lines)[-count:])


def _last_redraw(line: str) -> str:
    """What a terminal shows of a line a program redraws with carriage returns: the last
    non-empty segment (``"10%\\r20%\\r"`` reads ``20%``)."""
    if "\r" not in line:
        return line
    segments = [segment for segment in line.split("\r") if segment]
    return segments[-1] if segments else ""
