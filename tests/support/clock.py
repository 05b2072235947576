"""The one manual clock of the tests: it reads ``now`` until a test moves it."""

from __future__ import annotations


class ManualClock:
    """A clock a test sets or advances (``clock.now += 1.0``); callable like time.time."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
