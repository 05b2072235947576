"""The stop ladder, for a job we launched and one we attached to alike: ask nicely (SIGINT,
as Ctrl+C would), then firmly (SIGTERM), each with its grace, then SIGKILL."""

from __future__ import annotations

import signal
from collections.abc import Callable

# How long a job gets to finish after Ctrl+C, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = (10.0, 5.0)


def climb(send: Callable[[int], None], ended_within: Callable[[float], bool]) -> None:
    """``send(signum)`` delivers a signal; ``ended_within(seconds)`` waits up to that long and
    says whether the job is gone. SIGKILL only once both graces have passed."""
    for signum, grace_s in zip((signal.SIGINT, signal.SIGTERM), STOP_GRACE_S, strict=True):
        send(signum)
        if ended_within(grace_s):
            return
    send(signal.SIGKILL)
