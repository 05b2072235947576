"""The Log tab: the job's output as it is written, and the monitor's own notices."""

from __future__ import annotations

from textual.widgets import RichLog

from ...job.log import LogTail
from ...views import View
from .base import Panel, UiState


class LogPanel(RichLog, Panel):
    """``log`` is the job's output file (None when attached: the output went elsewhere)."""

    def __init__(self, log: LogTail | None, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=2000, wrap=False, markup=False)
        self._log = log
        self._notices_shown = 0
        self._reported_end = False

    def show_view(self, view: View, ui: UiState) -> None:
        snap = view.snap
        # Follow the end only while the user is at it: scrolled back, the log stays put.
        follow = self.is_vertical_scroll_end
        if self._log is not None:
            for line in self._log.read_new():
                self.write(line, scroll_end=follow)
        # By count of notices ever made, not of those kept (the session keeps the last 200).
        new = min(snap.notice_count - self._notices_shown, len(snap.notices))
        for notice in snap.notices[len(snap.notices) - new :] if new > 0 else ():
            self.write(f"[gputop-train] {notice}", scroll_end=follow)
        self._notices_shown = snap.notice_count
        if not snap.job.running and not self._reported_end:
            self._reported_end = True
            code = snap.job.exit_code
            if snap.job.failed:
                self.write(f"[gputop-train] the job failed with exit code {code}")
            elif snap.job.stopped_by:
                self.write(
                    f"[gputop-train] the job was stopped ({snap.job.stopped_by}): exit {code}"
                )
