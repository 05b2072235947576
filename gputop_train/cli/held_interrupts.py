"""Ctrl+C while the monitor starts: held, then handled as Ctrl+C later.

Before, a Ctrl+C between the job's start and the front end's own handlers raised a
KeyboardInterrupt: a traceback, and a job started in its own session left running with no
monitor and nothing said (issue 39). While held, SIGINT is only counted; ``release`` puts the
previous handler back and says how many came, and the caller passes them on as its front end
would: a job we started gets SIGINT (headless Ctrl+C), an attached one is left running.
"""

from __future__ import annotations

import signal
from types import FrameType


class HeldInterrupts:
    """Counts SIGINT from ``hold`` to ``release`` (the main thread only: elsewhere Python
    delivers no signal, and nothing is held)."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: signal.Handlers | object | None = None
        self._held = False

    def hold(self) -> HeldInterrupts:
        try:
            self._previous = signal.signal(signal.SIGINT, self._note)
            self._held = True
        except ValueError:  # not the main thread
            self._held = False
        return self

    def release(self) -> int:
        """Put the previous handler back (once); the interrupts that came while held."""
        if self._held:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._held = False
        return self.count

    def take(self) -> int:
        """The interrupts that came so far (counted from zero again), still holding: the
        headless front end's own handlers replace ours, with no moment of the default one
        between (a Ctrl+C there raised KeyboardInterrupt: the monitor vanished without its
        summaries and left the job and its relay running, 1 of 5 tries in a pipe, issue 46)."""
        count, self.count = self.count, 0
        return count

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
