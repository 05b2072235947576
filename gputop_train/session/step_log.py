"""The session's part that keeps the step rows: every process's steps in one bounded log, a
re-attach's resent backlog skipped, the steps a job made before this monitor started told
apart, and the samples counted per process. ``Session`` holds one and calls it under its own
lock; nothing here locks."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from . import stats
from .steps import Step

# The most of a monitor's lateness (the age of its latest row) a change's step makes up for:
# well inside the hook's limit on how far ahead a change may ask (hook.knobs.MAX_STEPS_AHEAD,
# 100,000 steps: 100 s at 1,000 steps a second), and a row older than this is a rank that
# stopped, not a late read.
MAX_LATE_S = 30.0

# 100k steps is hours of a fast loop at ~100 bytes each.
MAX_STEPS = 100_000


class StepLog:
    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.steps: deque[Step] = deque(maxlen=MAX_STEPS)
        self.last_step: dict[int, int] = {}  # per PID, its last step taken
        self.steps_before: dict[int, int] = {}  # per PID: its last step before started_at
        self.samples_by_pid: dict[int, int] = {}  # every process's samples so far
        self.pids: set[int] = set()  # every process that has sent a step
        self.total_samples: int | None = None  # of the session's own steps (no backlog)
        self._run_cache: tuple[int, stats.StepStats] | None = None

    def take(self, pid: int, steps: Iterable[Step]) -> None:
        """A process's steps (``parse``), in order."""
        for step in steps:
            if step.step <= self.last_step.get(pid, 0):
                continue  # a re-attach resends the ring's backlog
            self.last_step[pid] = step.step
            backlog = step.t <= self.started_at  # the ring a hook sends an attach
            if backlog:
                self.steps_before[pid] = step.step
            self.steps.append(step)
            self.pids.add(pid)
            if step.samples is not None:
                if not backlog:  # the session's samples are those of its own steps
                    self.total_samples = (self.total_samples or 0) + step.samples
                self.samples_by_pid[pid] = self.samples_by_pid.get(pid, 0) + step.samples

    def latest(self) -> dict[int, Step]:
        """Each process's latest step (a stall's evidence: who stopped where)."""
        latest: dict[int, Step] = {}
        for step in reversed(self.steps):
            latest.setdefault(step.pid, step)
            if len(latest) == len(self.pids):
                break
        return latest

    def samples_of_current(self, replaced: set[int]) -> int | None:
        """Samples so far, less a restart's dead generation's: the restart resumes from its
        checkpoint and counts them again."""
        if self.total_samples is None or not replaced:
            return self.total_samples
        return self.total_samples - sum(self.samples_by_pid.get(pid, 0) for pid in replaced)

    def recent_of(self, pid: int | None, count: int = 200) -> list[Step]:
        """``pid``'s steps among the last ``count`` of all."""
        return [s for s in list(self.steps)[-count:] if s.pid == pid]

    def run_stats(self, primary: int | None) -> stats.StepStats:
        """The whole run's step figures (cached: once the job has ended no step comes later
        but the drain's, which a new count of steps picks up)."""
        if self._run_cache is None or self._run_cache[0] != len(self.steps):
            self._run_cache = (len(self.steps), stats.step_stats(list(self.steps), primary))
        return self._run_cache[1]


def parse(pid: int, rows: Iterable[object]) -> tuple[list[Step], int]:
    """A process's step rows as steps, and the count of malformed rows (dropped)."""
    parsed = [Step.from_row(pid, row) if isinstance(row, list) else None for row in rows]
    good = [s for s in parsed if s is not None]
    return good, len(parsed) - len(good)


def step_ahead(
    furthest: int, recent: list[Step], ahead_s: float, min_ahead: int, now: float
) -> int:
    """The step ``ahead_s`` past where the ranks are at ``now`` at the pace of ``recent`` (one
    process's steps), ``min_ahead`` steps at least. Where they are is ``furthest`` plus the
    steps since ``recent``'s last row: a monitor that reads its rows late (niced, on a loaded
    box) knows of a step the ranks passed seconds ago, and 2 s past it was too close: a
    two-rank trial on the dev box (2026-12-06, beside CPU hogs) arrived after its step."""
    ahead = min_ahead
    if len(recent) >= 2 and recent[-1].t > recent[0].t:
        pace = (recent[-1].step - recent[0].step) / (recent[-1].t - recent[0].t)
        late_s = min(max(0.0, now - recent[-1].t), MAX_LATE_S)
        ahead = max(min_ahead, math.ceil(pace * (ahead_s + late_s)))
    return furthest + ahead
