"""The Log tab: the job's output as it is written, and the monitor's own notices.

A chatty job must never hold the UI. The tab is Textual's ``Log``: a line written is kept as
plain text and drawn only when it scrolls into view, so a refresh costs the lines that
arrived (appended to a list) and the rows on screen, never a render per line; it keeps the
newest ``SCROLLBACK_LINES`` and the file keeps everything. A hidden tab reads nothing: when
shown it reads what came since, at most ``job/log.py``'s READ_BYTES (a note counts the rest).

Before, each line was rendered as it was written (Rich's ``RichLog``), 200 a refresh: at 200
lines of 150 characters a step that was most of the UI thread, and on a loaded box the tab
showed ~55 s after ``3`` with the UI frozen 20 s (issue 46); before that, every line at every
refresh froze it ~15 s (issue 39). Figures: docs/benchmarks.md, "The Log tab".
"""

from __future__ import annotations

import re

from textual.widgets import Log

from ...job.log import LogTail
from ...views import View
from .base import Panel, UiState

# The scrollback the tab keeps (the file keeps everything): a few screens of context to
# scroll back through, at ~150 characters a line a few hundred kB.
SCROLLBACK_LINES = 2000
NOTE = "[gputop-train]"
# A terminal's escape sequences (CSI, OSC, two-character escapes) and any other control
# character but a tab. Drawn as text they reach the terminal as commands: a job's colours
# leaked into the UI and a cursor-up (tqdm's) drew over other rows (tmux, 2026-12-05).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erases
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: a window title, a hyperlink
    r"|\x1b[ -~]?"  # two-character escapes (save/restore the cursor...)
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but tab and newline, DEL, C1
)


def plain(line: str) -> str:
    """``line`` as text only: escape sequences dropped, other control characters too (the
    regular expression only for a line that has one: 4.8 -> 0.7 ms for 2,000 plain lines,
    dev box)."""
    return line if line.isprintable() else _ESCAPES.sub("", line)


class LogPanel(Log, Panel):
    """``log`` is the job's output file (None when attached: the output went elsewhere)."""

    def __init__(self, log: LogTail | None, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=SCROLLBACK_LINES, auto_scroll=True)
        self._log = log
        self._notices_shown = 0
        self._reported_end = False
        self._started = False

    def show_view(self, view: View, ui: UiState) -> None:
        snap = view.snap
        lines = []
        if not self._started and self._log is not None:
            lines.append(f"{NOTE} the job's output; the file keeps every line: {self._log.path}")
        self._started = True
        if self._log is not None:
            lines += self._log.read_new()
        # By count of notices ever made, not of those kept (the session keeps the last 200).
        new = min(snap.notice_count - self._notices_shown, len(snap.notices))
        if new > 0:
            lines += [f"{NOTE} {notice}" for notice in snap.notices[-new:]]
        self._notices_shown = snap.notice_count
        if not snap.job.running and not self._reported_end:
            self._reported_end = True
            code = snap.job.exit_code
            if snap.job.failed:
                lines.append(f"{NOTE} the job failed with exit code {code}")
            elif snap.job.stopped_by:
                lines.append(f"{NOTE} the job was stopped ({snap.job.stopped_by}): exit {code}")
        if lines:
            # Follows the end only while the user is at it: scrolled back, the log stays put.
            self.write_lines([plain(line) for line in lines[-SCROLLBACK_LINES:]])
