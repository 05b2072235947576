"""Stragglers on one node: the ranks' held steps cut into the verdict's windows
(advise/rank_verdict.py, the one rule the job view and the alerts share), and the richer
causes a node's monitor can add to it: its GPU's clocks (NVML, with the throttle reasons),
another process on its GPU.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import format as fmt
from ..session.clocks import GpuClocks
from ..session.comm import StepFigures
from ..session.job_gpus import GpuFigures, GpuUser
from ..session.stats import Observation, RankStats
from .rank_verdict import CAUSE_COVERS, HOLD_WINDOWS, MIN_STEPS, RankWindow, Verdict, judge
from .shared_gpu import SHARED_SM_PCT

if TYPE_CHECKING:
    from .rules.finding import Finding


def verdict_of(o: Observation) -> Verdict | None:
    """The straggler verdict on the ranks this monitor sees, over their held span."""
    return judge(rank_history(o.ranks))


def rank_history(ranks: tuple[RankStats, ...]) -> list[list[RankWindow]]:
    """The ranks' held span (the last HOLD_WINDOWS windows) cut into HOLD_WINDOWS windows of
    the steps every rank measured, by step number (ranks meet step by step), oldest first;
    processes without a rank (not one job's ranks) are left out."""
    held = {r.who.rank: r for r in ranks if r.who.rank is not None and r.held}
    if len(held) < 2:
        return []
    by_step = {rank: {f.step: f for f in r.held} for rank, r in held.items()}
    common = sorted(set.intersection(*(set(steps) for steps in by_step.values())))
    size = len(common) // HOLD_WINDOWS
    if size < MIN_STEPS:
        return []
    return [
        [
            _window(
                rank,
                r.who.host or "",
                [by_step[rank][n] for n in common[i * size : (i + 1) * size]],
            )
            for rank, r in sorted(held.items())
        ]
        for i in range(HOLD_WINDOWS)
    ]


def _window(rank: int, node: str, steps: list[StepFigures]) -> RankWindow:
    return RankWindow(
        rank,
        node,
        len(steps),
        statistics.median(s.step_ms for s in steps),
        _median([s.wait_ms for s in steps]),
        _median([s.input_ms for s in steps]),
    )


@dataclass(frozen=True)
class Cause:
    name: str  # "input", "GPU clocks", "shared GPU", "compute"
    evidence: str


def refined_cause(verdict: Verdict, o: Observation) -> Cause | None:
    """What a node's monitor can say beyond the verdict about one named rank whose gap its
    own compute carries, or no measurement covers: its GPU's clocks, another process on its
    GPU (NVML)."""
    if verdict.kind != "rank" or len(verdict.ranks) != 1 or verdict.cause == "input":
        return None
    rank = next((r for r in o.ranks if r.who.rank == verdict.ranks[0]), None)
    if rank is None:
        return None
    gap = verdict.gap_ms
    others = [r for r in o.ranks if r is not rank and r.comm is not None]
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
    return _shared_cause(rank, o, compute, others_compute, gap)


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


def input_source(rank: RankStats) -> str:
    """Where the rank's input figure comes from, in words: "its host's time before its
    forward, host gap", "the GPU idle before its forward", "its data-wait"."""
    parts = rank.steps.parts
    if parts is not None and parts.ms.get("data") is not None:
        if parts.clock == "gpu":
            return "the GPU idle before its forward"
        return f"its host's time before its forward, {parts.data_source}"
    return "its data-wait"


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
