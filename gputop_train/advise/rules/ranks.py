"""Ranks rule: one rank of a job holds the others back, by its data-wait or step time, or in
the collectives (advise/stragglers.py measures the lag and its cause)."""

from __future__ import annotations

import statistics

from ... import format as fmt
from ...session.stats import Observation, RankStats
from .. import stragglers
from ..stragglers import lagging_rank
from .finding import Finding

# A straggler among a job's ranks. DDP ranks meet at every gradient all-reduce, so their step
# times come out equal and a rank slowed in its input shows by its data-wait share (the others
# wait inside backward instead). Unslowed, 2 gloo ranks on the dev box differed by at most 0.3
# points of data-wait and 1.01x in step p50 over 18 windows; a rank slowed by 15 ms of input
# per 52 ms step stood 40 points out (benchmarks/ranks/stragglers.py, docs/ranks.md). The lines sit
# far above the unslowed spread: a rank that costs the job 15% of its time is worth chasing.
STRAGGLER_WAIT_POINTS = 15.0
STRAGGLER_STEP_RATIO = 1.3
STRAGGLER_MIN_STEPS = 5  # each rank's measured steps in the window


def _others(ranks: tuple[RankStats, ...], one: RankStats, figure: str) -> float | None:
    values = [getattr(r.steps, figure) for r in ranks if r is not one]
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def straggler(o: Observation) -> Finding | None:
    """One rank holds the others back: its data-wait share, or its step time (ranks that do
    not meet every step), stands out from the median of the others."""
    ranks = tuple(r for r in o.ranks if r.steps.steps >= STRAGGLER_MIN_STEPS)
    if len(ranks) < 2:
        return None
    worst = None
    for rank in ranks:
        wait, others_wait = rank.steps.data_wait_pct, _others(ranks, rank, "data_wait_pct")
        step, others_step = rank.steps.step_ms_p50, _others(ranks, rank, "step_ms_p50")
        if wait is not None and others_wait is not None:
            excess = wait - others_wait
            if excess >= STRAGGLER_WAIT_POINTS and (worst is None or excess / 100 > worst[1]):
                worst = (rank, excess / 100, "data")
        if step and others_step:
            slower = 1.0 - others_step / step
            if step >= STRAGGLER_STEP_RATIO * others_step and (worst is None or slower > worst[1]):
                worst = (rank, slower, "step")
    lag = lagging_rank(o)
    if worst is None:
        return _comm_straggler(lag, o) if lag is not None else None
    rank, lost, kind = worst
    name = rank.label
    wait_line = (
        f"{name} data-wait {fmt.pct(rank.steps.data_wait_pct)} of its step, the other ranks "
        f"{fmt.pct(_others(ranks, rank, 'data_wait_pct'))} (median; hook)"
    )
    step_line = (
        f"{name} step p50 {fmt.ms(rank.steps.step_ms_p50)}, the other ranks "
        f"{fmt.ms(_others(ranks, rank, 'step_ms_p50'))} (median; hook)"
    )
    if kind == "data":
        title = f"Straggler: {name} waits for data, and the other ranks wait for {name}"
        action = (
            f"find what slows {name}'s input: its shard of the data (larger or slower files), "
            f"its DataLoader workers and CPUs (NUMA, other jobs on its cores), its host"
        )
        evidence: tuple[str, ...] = (
            wait_line,
            step_line + ": the gradient all-reduce evens the ranks out",
        )
        if lag is not None and lag.rank is rank and lag.chronic:
            evidence += (stragglers.wait_line(lag),)
    else:
        title = f"Straggler: {name} steps slower than the other ranks"
        action = f"find what slows {name}: its GPU (clocks, throttling), its host, its input"
        evidence = (step_line, wait_line)
    gain = 1.0 / max(1.0 - lost, 0.2)
    return Finding(
        "ranks.straggler",
        title,
        evidence,
        action + "; the whole job runs at its pace",
        f"up to {gain:.1f}x",
        0.7,
        gain,
        rank=rank.who.rank,
    )


def _comm_straggler(lag: stragglers.Lag, o: Observation) -> Finding:
    """The rank the others wait for in the collectives (a compute straggler, or a stall)."""
    name = lag.rank.label
    cause = stragglers.cause_of(lag, o)
    if not lag.chronic:
        title = (
            f"Straggler: {name} stalled once (step {lag.stall_step}), and the other ranks "
            f"waited {fmt.ms(lag.stall_ms)} for it"
        )
        action = (
            f"a one-off, not a chronic lag: look at what {name} did then (a checkpoint, "
            "garbage collection, its storage or network); the ranks do not differ otherwise"
        )
        stall_ms = lag.stall_ms or 0.0
        evidence: tuple[str, ...] = (
            f"at step {lag.stall_step} the other ranks waited {fmt.ms(lag.stall_ms)} more in "
            f"collectives than {name} (hook), {stall_ms / lag.step_ms:.0f}x the "
            f"{fmt.ms(lag.step_ms)} step",
            stragglers.wait_line(lag) + ": over the window they wait alike",
        )
    else:
        cause_text = {
            "input": "waits for data",
            "GPU clocks": "runs on a slower (throttled) GPU",
            "shared GPU": "shares its GPU with another process",
            "compute": "computes slower",
        }.get(cause.name if cause else "", "arrives last at every collective")
        title = f"Straggler: {name} {cause_text}, and the other ranks wait for {name}"
        action = {
            "input": f"find what slows {name}'s input: its shard, its workers and CPUs",
            "GPU clocks": f"cool or re-power {name}'s GPU (nvidia-smi -q -d PERFORMANCE), or "
            "move the rank",
            "shared GPU": f"move the other process off {name}'s GPU, or the job to free GPUs "
            "(the GPU panel lists who uses each)",
            "compute": f"find what slows {name}'s own work: its GPU (clocks, other processes "
            "on it), its host's CPUs (other jobs, NUMA), uneven work per rank",
        }.get(
            cause.name if cause else "",
            f"the cause is not measured: look at {name}'s GPU, host and input",
        )
        evidence = (
            stragglers.wait_line(lag),
            f"chronic: over the window's median step, {name} costs the others "
            f"{fmt.ms(lag.gap_ms)} of each {fmt.ms(lag.step_ms)} step",
            cause.evidence if cause else "no measured cause covers most of the gap",
        )
    gain = 1.0 / max(1.0 - min(lag.gap_ms, lag.step_ms) / lag.step_ms, 0.2) if lag.chronic else 1.0
    return Finding(
        "ranks.straggler",
        title,
        evidence,
        action + ("; the whole job runs at its pace" if lag.chronic else ""),
        f"up to {gain:.1f}x" if lag.chronic else None,
        0.7,
        max(gain, 1.01),
        rank=lag.rank.who.rank,
    )
