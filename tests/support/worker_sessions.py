"""Each xdist worker runs in a session of its own, so no test monitor lowers the runner's.

Why: a monitor lowers its own session's autogroup to nice 10 while it runs
(``gputop_train/monitor/priority.py``), and the kernel shares the CPU between sessions first.
With the workers in the runner's session, the parallel lane's monitors held the runner's
terminal, every worker and every job a test starts in that session at nice 10 for most of the
lane: beside two CPU hogs in sessions of their own (weights 1024 each against 110) the suite
had a few percent of the box, and the module fixtures' live jobs did not take their first 20
steps within 120 s (issue 46; the fresh-clone run of 2026-12-06 02:05 UTC, 21 errors). In a
session of its own a worker's monitors lower that worker's session only, while the monitor
runs, and the runner's terminal is never touched. Under autogroup each worker is then also
one share of the CPU beside other sessions, as the jobs the monitors launch already were.

A session of its own leaves the terminal's foreground process group, so Ctrl+C reaches the
runner alone: the runner passes it on to each worker's process group (the worker and what it
started there), as the terminal did.
"""

from __future__ import annotations

import contextlib
import os
import signal
from types import FrameType

import psutil


def enter_own_session() -> None:
    """Make this process (an xdist worker) the leader of a new session."""
    with contextlib.suppress(PermissionError):  # already a group leader: stays where it is
        os.setsid()


def _interrupt_workers() -> None:
    """SIGINT to each child of ours that leads a session (the workers) and its group."""
    for child in psutil.Process().children():
        with contextlib.suppress(OSError):
            if os.getsid(child.pid) == child.pid:
                os.killpg(child.pid, signal.SIGINT)


def forward_interrupts() -> None:
    """In the runner: a Ctrl+C also interrupts the workers, then does what it did before."""
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # ignored or default: nothing of pytest's to keep
        return

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        _interrupt_workers()
        previous(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
