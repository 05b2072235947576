"""Each rank's wait in collectives over a window, and its figures step by step over the span
a straggler must hold over.

Ranks of a DDP job meet at every all-reduce, so their step times are equal; the slow rank is
the one that waits least there, while the others wait for it (docs/ranks.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .steps import Step

# The span the snapshot gives each rank's step-by-step figures over (RankStats.held): this
# many windows, which the advisor cuts into as many parts, one verdict window each; it is
# advise/rank_verdict.py's HOLD_WINDOWS (a test holds them equal: session sits below advise).
HOLD_WINDOWS = 3


@dataclass(frozen=True)
class CommStats:
    """One rank's collective wait (``comm_ms``) over a window's steps that measured it."""

    steps: int
    wait_ms_p50: float  # the median step's wait: the rank's usual wait
    wait_ms_mean: float  # with a one-off stall in the window, the mean moves, not the median
    wait_pct: float | None  # the wait's share of the rank's step time


@dataclass(frozen=True, slots=True)
class StepFigures:
    """One step of one rank, as the straggler verdict reads it; None: not measured."""

    step: int
    step_ms: float
    wait_ms: float | None  # in collectives
    input_ms: float | None  # before its forward: the step's data part, else its data-wait
    # or host gap, the larger (advise/stragglers.py input_ms, per step)


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
    )


def comm_by_pid(steps: Sequence[Step], pids: Sequence[int]) -> dict[int, CommStats]:
    """``comm_stats`` of each of ``pids`` that measured any."""
    found = {pid: comm_stats(own) for pid, own in _by_pid(steps, pids).items()}
    return {pid: figures for pid, figures in found.items() if figures is not None}


def figures_by_pid(
    steps: Sequence[Step], pids: Sequence[int], kept: KeptFigures | None = None
) -> dict[int, tuple[StepFigures, ...]]:
    """Each of ``pids``'s timed steps as the verdict reads them, oldest first (``kept``:
    those built before, kept between snapshots)."""
    figures = kept or _figures
    found = {
        pid: tuple(figures(s) for s in own if s.step_ms is not None)
        for pid, own in _by_pid(steps, pids).items()
    }
    if kept is not None:
        kept.called()
    return found


class KeptFigures:
    """Each step's ``StepFigures``, kept between snapshots (issue 47 point 7): a window slides
    by a few steps a tick, yet every snapshot built one per step of it (500 at 50 steps a
    second; the findings thread as many again). Steps are immutable: kept by identity, each
    entry holding its step so its id stays its own. What no call asked for over
    ``KEEP_CALLS`` calls is let go (two generations: an entry asked for moves to the young).
    ``Session`` holds one and calls it under its own lock; nothing here locks."""

    def __init__(self) -> None:
        self._young: dict[int, tuple[Step, StepFigures]] = {}
        self._old: dict[int, tuple[Step, StepFigures]] = {}
        self._calls = 0
        self.built = 0  # figures built, not found kept (tests read it)

    def __call__(self, step: Step) -> StepFigures:
        found = self._young.get(id(step))
        if found is None:
            found = self._old.pop(id(step), None)
            if found is None:
                found = (step, _figures(step))
                self.built += 1
            self._young[id(step)] = found
        return found[1]

    def called(self) -> None:
        """One call's steps asked: every ``KEEP_CALLS``-th, the old generation goes."""
        self._calls += 1
        if self._calls % KEEP_CALLS == 0:
            self._old, self._young = self._young, {}


# Calls between two generations of kept figures: a snapshot makes one to three (its ranks,
# its observation's), the findings thread's one more.
KEEP_CALLS = 8


def _figures(step: Step) -> StepFigures:
    assert step.step_ms is not None
    if step.part_data_ms is not None:
        input_ms: float | None = step.part_data_ms
    else:
        known = [v for v in (step.data_ms, step.host_gap_ms) if v is not None]
        input_ms = max(known) if known else None
    return StepFigures(step.step, step.step_ms, step.comm_ms, input_ms)


def _by_pid(steps: Sequence[Step], pids: Sequence[int]) -> dict[int, list[Step]]:
    by_pid: dict[int, list[Step]] = {pid: [] for pid in pids}
    for step in steps:
        if step.pid in by_pid:
            by_pid[step.pid].append(step)
    return by_pid
