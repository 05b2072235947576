"""Each rank's wait in collectives over a window: the figure that names a compute straggler.

Ranks of a DDP job meet at every all-reduce, so their step times are equal; the slow rank is
the one that waits least there, while the others wait for it (docs/ranks.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .steps import Step

# A rank is named a straggler only where its lag holds over this many windows: the snapshot
# also gives each rank's waits over that span (RankStats.held), cut into as many parts by the
# rule (advise/stragglers.py). Unslowed 4 gloo ranks of CPU work beside two busy loops on the
# 2-core dev box: judged on one window, a rank was named in 4 of 41 lines (ranks 1 and 3);
# held over three, in none of 31, while a rank slowed 30 ms was named in 16 of 18 lines
# (2026-11-27, benchmarks/ranks/stragglers.py --cpu-bound, docs/ranks.md "The line under load").
HOLD_WINDOWS = 3


@dataclass(frozen=True)
class CommStats:
    """One rank's collective wait (``comm_ms``) over a window's steps that measured it."""

    steps: int
    wait_ms_p50: float  # the median step's wait: the rank's usual wait
    wait_ms_mean: float  # with a one-off stall in the window, the mean moves, not the median
    wait_pct: float | None  # the wait's share of the rank's step time
    # (step number, wait ms) of each measured step, oldest first: ranks' steps are matched by
    # number to tell chronic lag from a one-off stall.
    per_step: tuple[tuple[int, float], ...]

    def wait_at(self) -> dict[int, float]:
        return dict(self.per_step)


def comm_stats(steps: Sequence[Step]) -> CommStats | None:
    """The window's collective wait of one process; None where no step measured it (no
    collective, a hook from before comm_ms, an untimed builtin comm hook)."""
    timed = [s for s in steps if s.comm_ms is not None]
    if not timed:
        return None
    waits = [s.comm_ms for s in timed if s.comm_ms is not None]
    step_total = sum(s.step_ms for s in timed if s.step_ms is not None)
    timed_wait = sum(s.comm_ms for s in timed if s.step_ms is not None and s.comm_ms is not None)
    return CommStats(
        steps=len(timed),
        wait_ms_p50=statistics.median(waits),
        wait_ms_mean=statistics.fmean(waits),
        wait_pct=100.0 * timed_wait / step_total if step_total > 0 else None,
        per_step=tuple((s.step, s.comm_ms) for s in timed if s.comm_ms is not None),
    )


def comm_by_pid(steps: Sequence[Step], pids: Sequence[int]) -> dict[int, CommStats]:
    """``comm_stats`` of each of ``pids`` that measured any."""
    by_pid: dict[int, list[Step]] = {pid: [] for pid in pids}
    for step in steps:
        if step.pid in by_pid:
            by_pid[step.pid].append(step)
    found = {pid: comm_stats(own) for pid, own in by_pid.items()}
    return {pid: figures for pid, figures in found.items() if figures is not None}
