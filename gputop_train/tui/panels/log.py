"""The Log tab: the job's output as it is written, and the monitor's own notices.

A chatty job must never hold the UI: the tab renders at most ``LINES_PER_TICK`` lines per
refresh, the newest ones, and only while it is on screen; a hidden tab keeps no more than
that many in wait. What is passed over is counted in one line that names the log file, which
keeps everything. Before, every line went to the widget at every refresh, and a hidden tab's
widget queued each one to render when first shown: the TUI froze ~15 s on a chatty job, and
once took ~60 s to leave (issue 39).
"""

from __future__ import annotations

from collections import deque

from textual.widgets import RichLog

from ...job.log import LogTail
from ...views import View
from .base import Panel, UiState

# The most lines one refresh renders: three screens of a 60-line terminal, a small fraction
# of a refresh's budget; a job printing faster than this a refresh has its tail shown, the
# rest counted (the log file keeps it).
LINES_PER_TICK = 200
# The scrollback the tab keeps rendered (the file keeps everything).
SCROLLBACK_LINES = 2000


class LogPanel(RichLog, Panel):
    """``log`` is the job's output file (None when attached: the output went elsewhere)."""

    def __init__(self, log: LogTail | None, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=SCROLLBACK_LINES, wrap=False, markup=False)
        self._log = log
        self._notices_shown = 0
        self._reported_end = False
        self._waiting: deque[str] = deque(maxlen=LINES_PER_TICK)
        self._passed_over = 0  # lines that left the wait unrendered since the last note

    def show_view(self, view: View, ui: UiState) -> None:
        snap = view.snap
        if self._log is not None:
            self._hold(self._log.read_new())
        # By count of notices ever made, not of those kept (the session keeps the last 200).
        new = min(snap.notice_count - self._notices_shown, len(snap.notices))
        notices = snap.notices[len(snap.notices) - new :] if new > 0 else ()
        self._hold([f"[gputop-train] {notice}" for notice in notices])
        self._notices_shown = snap.notice_count
        if not snap.job.running and not self._reported_end:
            self._reported_end = True
            code = snap.job.exit_code
            if snap.job.failed:
                self._hold([f"[gputop-train] the job failed with exit code {code}"])
            elif snap.job.stopped_by:
                self._hold(
                    [f"[gputop-train] the job was stopped ({snap.job.stopped_by}): exit {code}"]
                )
        if self.is_on_screen:
            self._render_waiting()

    def on_show(self) -> None:
        """Shown (its tab chosen): what waited is drawn at once, not at the next refresh."""
        self._render_waiting()

    def _hold(self, lines: list[str]) -> None:
        """Keep the newest lines to render; count the ones that fall out unrendered."""
        overflow = len(self._waiting) + len(lines) - LINES_PER_TICK
        if overflow > 0:
            self._passed_over += overflow
        self._waiting.extend(lines[-LINES_PER_TICK:])

    def _render_waiting(self) -> None:
        # Follow the end only while the user is at it: scrolled back, the log stays put.
        follow = self.is_vertical_scroll_end
        if self._passed_over:
            where = f": see {self._log.path}" if self._log is not None else ""
            self.write(
                f"[gputop-train] {self._passed_over:,} lines not shown here{where}",
                scroll_end=follow,
            )
            self._passed_over = 0
        while self._waiting:
            self.write(self._waiting.popleft(), scroll_end=follow)
