"""What the front ends (the TUI, headless, the exporter) ask of the rest of the program, as
protocols: a snapshot source, the controls of a live job (the monitor implements them) and
the watch's clock (cli/drive.py keeps it: headless prints a line at each of its ticks).

They lived in tui/boundary.py, where headless could not share them without reaching into the
TUI's package (issue 47 point 4); here, below the front ends and above the session, each front
end and its tests' fakes read the same shapes. What only the TUI reads (a replay's timeline,
its options) stays in tui/boundary.py.
"""

from __future__ import annotations

from typing import Any, Protocol

from .session.model import Snapshot


class SnapshotSource(Protocol):
    """The session's (or the replay's) state, summarised for the shown panels."""

    def __call__(
        self, window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot: ...


class JobControls(Protocol):
    """What the user may ask of a live job; each answer is one line to show."""

    def request_knob(self, name: str, value: Any) -> str | None:
        """None when queued for the next step boundary, else why not."""
        ...

    def scan_syncs(self) -> str: ...

    def toggle_autopilot(self) -> str: ...

    def dump_stall(self) -> str: ...


class Clock(Protocol):
    """The watch's time, kept by whoever drives the job (cli/drive.py): a front end asks it
    when its next line is due and when the watch is over, so a test's fake clock moves no
    real time and needs no process."""

    def now(self) -> float:
        """The session's clock: the whole run's window ends here."""
        ...

    def wait(self, seconds: float) -> bool:
        """Wait at most ``seconds``; True once the watch is over (the job ended, a detach)."""
        ...
