"""Compute stragglers: the rank the others wait for in the collectives, and why.

Under DDP the all-reduce evens every rank's step time, so a rank slowed in its compute reads
like the others by its step time and data-wait. Where it differs is the wait in the
collectives: the slow rank arrives last and waits least; the others wait for it. The gap
between its wait and the others' is what it costs the job per step. A rank is named only
where the gap holds over the last HOLD_WINDOWS windows, in each of them (a burst of host load
lags one rank for a few seconds, a slowed rank lags in every step). The finding names a cause
only where a measurement covers most of that gap: its input (the time before its forward:
DataLoader wait, or a loader-less loop's host gap), its GPU's clocks (NVML, with the throttle
reasons), another process on its GPU, else its own compute (the step less its input and
waits).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import format as fmt
from ..session.clocks import GpuClocks
from ..session.comm import HOLD_WINDOWS
from ..session.job_gpus import GpuFigures, GpuUser
from ..session.stats import Observation, RankStats
from .shared_gpu import SHARED_SM_PCT

if TYPE_CHECKING:
    from .rules.finding import Finding

# The gap (the others' median wait less the rank's) that names a straggler, as a share of the
# step: unslowed, 2 and 4 gloo ranks on the dev box read gaps of at most 5.3 and 6.1 points
# of their step over 25 and 13 windows, while a rank with +30 ms of compute in a ~55 ms step
# stood 49-56 points out (benchmarks/ranks/stragglers.py, 2026-11-24, docs/ranks.md). 10 points is
# a rank costing the job a tenth of its time: worth chasing, over the unslowed spread.
COMM_GAP_SHARE = 0.10
# ... and at least this many ms: sub-millisecond steps on an idle box jitter by more than 10%.
COMM_GAP_MIN_MS = 2.0
# A cause is named when its measurement covers this share of the gap ("most of it").
CAUSE_COVERS = 0.6
# A one-off stall: one step in which the rank held the others this many times the usual step
# (a GC pause, a checkpoint, a hiccup of its storage); the chronic line above failed.
STALL_STEP_RATIO = 5.0
MIN_STEPS = 5  # each rank's measured steps in the window


@dataclass(frozen=True)
class Lag:
    """A rank the others wait for, and by how much per step."""

    rank: RankStats
    wait_ms: float  # its median wait per step
    others_ms: float  # the others' median of their median waits
    step_ms: float  # the job's median step
    chronic: bool
    stall_step: int | None = None  # a one-off: the step it held the others, and how long
    stall_ms: float | None = None

    @property
    def gap_ms(self) -> float:
        if not self.chronic and self.stall_ms is not None:
            return self.stall_ms
        return self.others_ms - self.wait_ms


def lagging_rank(o: Observation) -> Lag | None:
    """The rank that waits least in the collectives while the others wait for it: chronic
    (over the window's median step) or, failing that, a one-off stall."""
    ranks = tuple(r for r in o.ranks if r.comm is not None and r.comm.steps >= MIN_STEPS)
    if len(ranks) < 2:
        return None
    slowest = min(ranks, key=lambda r: r.comm.wait_ms_p50 if r.comm else 0.0)
    others = [r for r in ranks if r is not slowest]
    others_ms = statistics.median(r.comm.wait_ms_p50 for r in others if r.comm)
    steps = [r.steps.step_ms_p50 for r in ranks if r.steps.step_ms_p50]
    if slowest.comm is None or not steps:
        return None
    step_ms = statistics.median(steps)
    gap = others_ms - slowest.comm.wait_ms_p50
    line = max(COMM_GAP_SHARE * step_ms, COMM_GAP_MIN_MS)
    if gap >= line and _holds(ranks, slowest, line):
        return Lag(slowest, slowest.comm.wait_ms_p50, others_ms, step_ms, chronic=True)
    return _stall(ranks, step_ms)


def _holds(ranks: tuple[RankStats, ...], slowest: RankStats, line: float) -> bool:
    """Whether, in each of HOLD_WINDOWS consecutive parts of the steps every rank measured over
    its held span (the last HOLD_WINDOWS windows; the window itself where not given),
    ``slowest`` waits least and the others' median wait is ``line`` ms more than its own."""
    waits = {r.who.pid: held.wait_at() for r in ranks if (held := r.held or r.comm)}
    common = sorted(set.intersection(*(set(w) for w in waits.values())))
    size = len(common) // HOLD_WINDOWS
    if size == 0:
        return False
    for part in range(HOLD_WINDOWS):
        steps = common[part * size : (part + 1) * size]
        medians = {pid: statistics.median(w[n] for n in steps) for pid, w in waits.items()}
        own = medians[slowest.who.pid]
        others = statistics.median(v for pid, v in medians.items() if pid != slowest.who.pid)
        if min(medians.values()) < own or others - own < line:
            return False
    return True


def _stall(ranks: tuple[RankStats, ...], step_ms: float) -> Lag | None:
    """The step with the largest gap between one rank's wait and the others' (median), if it
    stands STALL_STEP_RATIO steps tall."""
    waits = {r.who.pid: r.comm.wait_at() for r in ranks if r.comm}
    common = set.intersection(*(set(w) for w in waits.values()))
    best: tuple[float, int, RankStats] | None = None
    for step in common:
        at = {r.who.pid: waits[r.who.pid][step] for r in ranks}
        for rank in ranks:
            others = statistics.median(v for pid, v in at.items() if pid != rank.who.pid)
            gap = others - at[rank.who.pid]
            if best is None or gap > best[0]:
                best = (gap, step, rank)
    if best is None or best[0] < max(STALL_STEP_RATIO * step_ms, COMM_GAP_MIN_MS):
        return None
    gap, step, rank = best
    assert rank.comm is not None
    others_ms = statistics.median(r.comm.wait_ms_p50 for r in ranks if r.comm and r is not rank)
    return Lag(rank, rank.comm.wait_ms_p50, others_ms, step_ms, False, step, gap)


def wait_line(lag: Lag) -> str:
    """ "rank 3 waits 2.0 ms per step in collectives, the other ranks 41.0 ms (median; hook)"."""
    return (
        f"{lag.rank.label} waits {fmt.ms(lag.wait_ms)} per step in collectives (all-reduce, "
        f"barrier...), the other ranks {fmt.ms(lag.others_ms)} (median; hook)"
    )


@dataclass(frozen=True)
class Cause:
    name: str  # "input", "GPU clocks", "shared GPU", "compute"
    evidence: str


def cause_of(lag: Lag, o: Observation) -> Cause | None:
    """What covers most of the gap on the lagging rank, or None (then the finding says the
    gap is not explained). A one-off stall is not split into causes."""
    if not lag.chronic:
        return None
    rank, gap = lag.rank, lag.gap_ms
    others = [r for r in o.ranks if r is not rank and r.comm is not None]
    own_input, others_input = input_ms(rank), _median([input_ms(r) for r in others])
    if (
        own_input is not None
        and others_input is not None
        and own_input - others_input >= CAUSE_COVERS * gap
    ):
        return Cause("input", _input_line(rank, own_input, others_input))
    compute = compute_ms(rank)
    others_compute = _median([compute_ms(r) for r in others])
    clocks = _clocks_of(rank, o)
    others_clock = _median([c.sm_clock_mhz for r in others if (c := _clocks_of(r, o)) is not None])
    if (
        clocks is not None
        and clocks.sm_clock_mhz
        and others_clock
        and compute is not None
        and compute * (1.0 - clocks.sm_clock_mhz / others_clock) >= CAUSE_COVERS * gap
    ):
        reasons = ", ".join(f"{name} {share:.0%}" for name, share in clocks.reasons) or "none"
        return Cause(
            "GPU clocks",
            f"{rank.label}'s GPU {clocks.index} runs its SM clock at "
            f"{clocks.sm_clock_mhz:.0f} MHz, the other ranks' {others_clock:.0f} MHz (NVML; "
            f"throttle reasons: {reasons}): its compute is that much slower",
        )
    shared = _shared_cause(rank, o, compute, others_compute, gap)
    if shared is not None:
        return shared
    if compute is None or others_compute is None or compute - others_compute < CAUSE_COVERS * gap:
        return None
    return Cause(
        "compute",
        f"{rank.label}'s own work (its step less its input and collective wait) "
        f"takes {fmt.ms(compute)}, the other ranks' {fmt.ms(others_compute)} "
        "(median; hook)",
    )


def input_ms(rank: RankStats) -> float | None:
    """The rank's time per step before its forward, waiting for its input: the step's data
    part (docs/steps.md: on the GPU's clock the GPU's idle time before the forward, on the
    host's the host gap, a loader-less ``get_batch`` included), else its DataLoader wait or
    host gap, the larger."""
    parts = rank.steps.parts
    if parts is not None and parts.ms.get("data") is not None:
        return parts.ms["data"]
    figures = (_ms_of(rank, "data_wait_pct"), _ms_of(rank, "host_gap_pct"))
    known = [v for v in figures if v is not None]
    return max(known) if known else None


def _input_line(rank: RankStats, own: float, others: float) -> str:
    parts = rank.steps.parts
    if parts is not None and parts.ms.get("data") is not None:
        source = (
            "the GPU idle before its forward"
            if parts.clock == "gpu"
            else f"its host's time before its forward, {parts.data_source}"
        )
    else:
        source = "its data-wait"
    return (
        f"{rank.label} spends {fmt.ms(own)} a step on its input ({source}), the other ranks "
        f"{fmt.ms(others)} (median; hook): its input covers the gap"
    )


def compute_ms(rank: RankStats) -> float | None:
    """The rank's own work per step: its step less its input and its collective wait."""
    step = rank.steps.step_ms_p50
    if step is None or rank.comm is None:
        return None
    return max(0.0, step - (input_ms(rank) or 0.0) - rank.comm.wait_ms_p50)


def _ms_of(rank: RankStats, share: str) -> float | None:
    pct, step = getattr(rank.steps, share), rank.steps.step_ms_p50
    return None if pct is None or step is None else pct / 100.0 * step


def _clocks_of(rank: RankStats, o: Observation) -> GpuClocks | None:
    """The clocks of the GPU the rank runs on (one GPU per rank; else none is chosen)."""
    if len(rank.gpus) != 1:
        return None
    return next((c for c in o.gpu_clocks if c.index == rank.gpus[0]), None)


def _gpu_of(rank: RankStats, o: Observation) -> GpuFigures | None:
    """The figures of the GPU the rank runs on (one GPU per rank; else none is chosen)."""
    if len(rank.gpus) != 1:
        return None
    return next((g for g in o.gpus if g.index == rank.gpus[0]), None)


def _shared_cause(
    rank: RankStats,
    o: Observation,
    compute: float | None,
    others_compute: float | None,
    gap: float,
) -> Cause | None:
    """Other processes on the rank's GPU (NVML per process, session/job_gpus.py) taking
    SHARED_SM_PCT or more of its SM time beyond what they take of the other ranks' GPUs, where
    that excess covers the gap (the rank's compute waits that much behind their kernels) or
    the rank's own work is slower by as much: a process on every rank's GPU sets none apart."""
    gpu = _gpu_of(rank, o)
    if gpu is None or compute is None:
        return None
    share = gpu.others_sm_pct or 0.0
    others = [g.others_sm_pct or 0.0 for r in o.ranks if r is not rank and (g := _gpu_of(r, o))]
    others_share = _median(list(others)) or 0.0
    excess = share - others_share
    slower = others_compute is not None and compute - others_compute >= CAUSE_COVERS * gap
    if excess < SHARED_SM_PCT or not (compute * excess / 100.0 >= CAUSE_COVERS * gap or slower):
        return None
    users = ", ".join(_user(u) for u in gpu.others)
    return Cause(
        "shared GPU",
        f"{rank.label}'s GPU {gpu.index} is shared: {users} take {fmt.pct(share)} of its SM "
        f"time, of the other ranks' GPUs {fmt.pct(others_share)} (NVML per process): its "
        "compute waits behind theirs",
    )


def _user(user: GpuUser) -> str:
    """Who, and what of the GPU's SM time it takes: "PID 900 (alice, 45% SM)"."""
    known = [user.user, None if user.sm_pct is None else f"{user.sm_pct:.0f}% SM"]
    said = ", ".join(k for k in known if k)
    return f"PID {user.pid}" + (f" ({said})" if said else "")


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def straggler_first(fired: list[Finding], o: Observation) -> list[Finding]:
    """A straggler that names the primary rank ahead of the job-level input findings: those
    read the primary's own figures (session/stats.py), so its straggling explains them."""
    primary = next((r.who.rank for r in o.ranks), None)
    found = next((f for f in fired if f.id == "ranks.straggler"), None)
    if found is None or primary is None or found.rank != primary:
        return fired
    first_input = next((i for i, f in enumerate(fired) if f.id.startswith("input.")), None)
    at = fired.index(found)
    if first_input is None or first_input > at:
        return fired
    rest = [f for f in fired if f is not found]
    return [*rest[:first_input], found, *rest[first_input:]]
