"""The stop ladder, for a job we launched and one we attached to alike: ask nicely (SIGINT,
as Ctrl+C would), then firmly (SIGTERM), each with its grace, then SIGKILL. A job still there
after SIGINT's grace is hung (an NCCL collective one rank left): before SIGTERM the ladder
asks where each rank waits (the stall dump), so the user learns why (docs/exits.md)."""

from __future__ import annotations

import signal
from collections.abc import Callable

# How long a job gets to finish after Ctrl+C, then after SIGTERM, before SIGKILL. A DDP or
# FSDP job ends its collectives and exits within a second or two of SIGINT when every rank
# got it; 10 s is several checkpoint-free steps of a slow job.
STOP_GRACE_S = (10.0, 5.0)
# After SIGKILL: the kernel ends the processes at once, unless one sits in the GPU driver.
KILL_WAIT_S = 10.0


def climb(
    send: Callable[[int], None],
    ended_within: Callable[[float], bool],
    hung: Callable[[], None] | None = None,
    interrupted: bool = False,
) -> bool:
    """``send(signum)`` delivers a signal; ``ended_within(seconds)`` waits up to that long and
    says whether the job is gone; ``hung()`` is called once SIGINT's grace has passed, before
    SIGTERM. ``interrupted``: SIGINT was sent already (Ctrl+C). SIGKILL only once both graces
    have passed. Whether the job is gone at the end."""
    for index, (signum, grace_s) in enumerate(
        zip((signal.SIGINT, signal.SIGTERM), STOP_GRACE_S, strict=True)
    ):
        if index > 0 and hung is not None:
            hung()
        if index > 0 or not interrupted:
            send(signum)
        if ended_within(grace_s):
            return True
    send(signal.SIGKILL)
    return ended_within(KILL_WAIT_S)
