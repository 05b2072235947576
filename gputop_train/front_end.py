"""What every front end (the TUI, headless, the exporter) asks of the rest of the program,
as protocols: a snapshot source and the controls of a live job (the monitor implements them).

They lived in tui/boundary.py, where headless could not share them without reaching into the
TUI's package (issue 47 point 4); here, below the front ends and above the session, each front
end and its tests' fakes read the same shapes.
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
