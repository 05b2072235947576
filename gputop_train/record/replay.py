"""A time cursor over a recording: play, pause, seek and speed, feeding a session."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..session.model import Snapshot
from .reader import Recording, apply, new_session

SPEEDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


class ReplayController:
    """Moves a cursor through a recording; forward is incremental, backward rebuilds."""

    def __init__(self, recording: Recording, clock: Callable[[], float] = time.monotonic) -> None:
        self.recording = recording
        self._wall = clock
        self.playing = True
        self.speed_index = 0
        self._last_wall = clock()
        self._rebuild()

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    @property
    def cursor(self) -> float:
        return self._clock.t

    def _rebuild(self) -> None:
        self.session, self._clock = new_session(self.recording)
        self._next = 0

    def seek(self, t: float) -> None:
        t = max(self.recording.started_at, min(t, self.recording.ended_at))
        if t < self._clock.t:
            self._rebuild()
        events = self.recording.events
        while self._next < len(events) and events[self._next]["t"] <= t:
            self._clock.t = events[self._next]["t"]
            apply(self.session, events[self._next])
            self._next += 1
        self._clock.t = t

    def toggle(self) -> None:
        self.playing = not self.playing

    def faster(self, step: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + step))

    def snapshot(
        self, window_s: float, chart_window_s: float, chart_points: int, with_phases: bool = False
    ) -> Snapshot:
        """Advance by the wall time since the last call (when playing), then snapshot."""
        now = self._wall()
        if self.playing:
            self.seek(self.cursor + (now - self._last_wall) * self.speed)
            if self.cursor >= self.recording.ended_at:
                self.playing = False
        self._last_wall = now
        return self.session.snapshot(window_s, chart_window_s, chart_points, with_phases)
