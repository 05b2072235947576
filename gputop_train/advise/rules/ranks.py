"""Ranks rule: the rank (or node) the job waits for, as the straggler verdict names it
(advise/rank_verdict.py, the rule the job view and the alerts share), with the causes a
node's monitor adds (advise/stragglers.py: its GPU's clocks, a shared GPU)."""

from __future__ import annotations

from ... import format as fmt
from ...session.stats import Observation
from .. import stragglers
from ..rank_verdict import Verdict
from .finding import Finding

# What the verdict's cause is called in a title, and what to do about it.
_SAYS = {
    "input": "waits for data",
    "compute": "computes slower",
    "GPU clocks": "runs on a slower (throttled) GPU",
    "shared GPU": "shares its GPU with another process",
}


def straggler(o: Observation) -> Finding | None:
    """One rank, or every rank of one node, holds the others back (held over the verdict's
    windows); all ranks slower together is the job's finding (input-bound), not this one."""
    verdict = stragglers.verdict_of(o)
    if verdict is None or verdict.kind == "job":
        return None
    refined = stragglers.refined_cause(verdict, o)
    cause = refined.name if refined is not None else verdict.cause
    who = _who(verdict)
    one = verdict.kind == "rank" and len(verdict.ranks) == 1
    says = _SAYS.get(cause or "", "is slower, by no measured cause")
    if verdict.kind == "node":
        title = f"Slow node: {who} {_plural(says)}, and the other nodes' ranks wait for them"
    else:
        verb, them = (says, who) if one else (_plural(says), "them")
        title = f"Straggler: {who} {verb}, and the other ranks wait for {them}"
    gain = 1.0 / max(1.0 - min(verdict.gap_ms, verdict.step_ms) / verdict.step_ms, 0.2)
    evidence = (verdict.evidence,) + ((refined.evidence,) if refined is not None else ())
    if cause == "input":
        evidence += tuple(_input_line(o, rank) for rank in verdict.ranks)
    return Finding(
        "ranks.straggler",
        title,
        evidence,
        _action(verdict, cause) + "; the whole job runs at its pace",
        f"up to {gain:.1f}x",
        0.7,
        max(gain, 1.01),
        rank=verdict.ranks[0],
        ranks=verdict.ranks,
    )


def _input_line(o: Observation, rank: int) -> str:
    """Where a named rank's input time is measured: "rank 1 spends 30.9 ms a step on its input
    (its host's time before its forward, host gap; hook)"."""
    stats = next((r for r in o.ranks if r.who.rank == rank), None)
    figure = stragglers.input_ms(stats) if stats is not None else None
    if stats is None or figure is None:
        return f"rank {rank}'s input is not split from its step (hook)"
    return (
        f"rank {rank} spends {fmt.ms(figure)} a step on its input "
        f"({stragglers.input_source(stats)}; hook)"
    )


def _who(verdict: Verdict) -> str:
    ranks = ", ".join(str(r) for r in verdict.ranks)
    if verdict.kind == "node":
        return f"node {verdict.node} (ranks {ranks})"
    return f"rank{'s' if len(verdict.ranks) > 1 else ''} {ranks}"


def _plural(says: str) -> str:
    """ "waits for data" -> "wait for data": the words said of several ranks."""
    verb, _, rest = says.partition(" ")
    verb = {"computes": "compute", "is": "are"}.get(verb, verb.removesuffix("s"))
    return f"{verb} {rest}"


def _action(verdict: Verdict, cause: str | None) -> str:
    name = _who(verdict)
    if verdict.kind == "node":
        return (
            f"find what slows {name}: every rank there is slower (a loaded or throttled host, "
            f"its network, its storage); ssh to {verdict.node} and attach gputop-train there"
        )
    return {
        "input": f"find what slows {name}'s input: its shard, its workers and CPUs",
        "GPU clocks": f"cool or re-power {name}'s GPU (nvidia-smi -q -d PERFORMANCE), or move "
        "the rank",
        "shared GPU": f"move the other process off {name}'s GPU, or the job to free GPUs (the "
        "GPU panel lists who uses each)",
        "compute": f"find what slows {name}'s own work: its GPU (clocks, other processes on "
        "it), its host's CPUs (other jobs, NUMA), uneven work per rank",
    }.get(cause or "", f"the cause is not measured: look at {name}'s GPU, host and input")
