"""The straggler verdict: which rank (or node) the job waits for, from each rank's figures.

One rule for every front end and the alerts alike: the node's advisor (advise/stragglers.py),
the job view that reads Prometheus or the nodes' exporters, and docs/prometheus/rules.yml
(the same lines in PromQL). Standard library only, and no session import, so that a reader
of Prometheus can call it with figures it built itself.

Ranks that meet at every collective come out with equal step times; what tells the slow one
is that the others wait for it. Each rank is held against the **median of the other ranks**
with a **MAD** scale (the median absolute deviation: one slow rank, or a slow node's few,
moves neither), on three figures, each what the job loses per step: its wait in collectives
under the others' (they wait for it), its step over theirs (ranks that do not meet every
step), its input over theirs. A rank is named only where it stands out in each of the last
HOLD_WINDOWS windows; every rank of one node standing out together is a slow node; all ranks
slower together move the median with them: never a straggler (an input-bound job is told as
the job's).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# The gap (what the others lose per step) that names a rank, as a share of the job's median
# step: unslowed, 2 and 4 gloo ranks on the dev box read gaps of at most 5.3 and 6.1% of their
# step over 25 and 13 windows, while a rank with +30 ms of compute in a ~55 ms step stood
# 49-56% out (git show 6a2d3ea:benchmarks/ranks/stragglers.py, 2026-11-24, docs/ranks.md).
# 10% is a rank costing the job a tenth of its time: worth chasing, over the unslowed spread.
GAP_SHARE = 0.10
# ... and at least this many ms: sub-millisecond steps on an idle box jitter by more than 10%.
GAP_MIN_MS = 2.0
# ... and this many robust standard deviations (1.4826 x MAD) of the other ranks' figure: with
# 3 ranks or more the others' own spread sets the line where they jitter more than 10% of the
# step (8 CPU ranks sharing 2 cores beside busy loops, docs/ranks.md "The verdict's rates").
# 3 is the usual outlier line of a robust z-score; at 2 ranks the MAD of one value is 0 and
# the share above holds alone.
MAD_K = 3.0
MAD_TO_SIGMA = 1.4826  # the MAD of a normal sample times this is its standard deviation
# A rank is named only where it stands out in each of this many consecutive windows:
# unslowed 4 gloo ranks of CPU work beside two busy loops on the 2-core dev box, judged on one
# window, named a rank in 4 of 41 lines; held over three, in none of 31, while a rank slowed
# 30 ms was named in 16 of 18 (2026-11-27, stragglers.py --cpu-bound: git show
# 6a2d3ea:benchmarks/ranks/stragglers.py).
HOLD_WINDOWS = 3
# A cause is named when its measurement covers this share of the gap ("most of it").
CAUSE_COVERS = 0.6
# Each rank's measured steps in a window, for its medians to count.
MIN_STEPS = 5
# Every rank spends this share of its step on its input: the job is input-bound, not one rank
# (the advisor's INPUT_DOMINANT_PCT, advise/rules/window.py; the GputopTrainInputBound alert).
JOB_INPUT_SHARE = 0.20


@dataclass(frozen=True)
class RankWindow:
    """One rank's figures over one window, medians per step."""

    rank: int
    node: str  # the rank's node (host name)
    steps: int  # measured steps in the window
    step_ms: float | None
    wait_ms: float | None  # time the rank stalled in collectives per step
    input_ms: float | None  # data wait, or a loader-less loop's host gap, per step
    compute_ms: float | None = None  # its own work; else its step less its input and wait


@dataclass(frozen=True)
class Verdict:
    """Who the job waits for, why, and what it costs per step."""

    kind: Literal["rank", "node", "job"]  # one slow rank (or a few, not a whole node); every
    # rank of one node; all together (not a straggler)
    ranks: tuple[int, ...]
    node: str | None
    cause: str | None  # "input", "compute", … or None when no measurement covers the gap
    gap_ms: float  # what it costs the job per step
    step_ms: float
    evidence: str  # one sentence with the numbers


@dataclass(frozen=True)
class _Standout:
    """One rank standing out in one window: by how much, on which figure, against what."""

    rank: RankWindow
    figure: str  # "wait", "step", "input"
    own_ms: float
    others_ms: float
    gap_ms: float
    line_ms: float


def judge(history: Sequence[Sequence[RankWindow]]) -> Verdict | None:
    """The last windows, oldest first; each one RankWindow per rank."""
    held = [list(w) for w in history[-HOLD_WINDOWS:]]
    if len(held) < HOLD_WINDOWS:
        return None
    slow_node = _slow_node(held)
    if slow_node is not None:
        return slow_node
    found = [_standouts(window) for window in held]
    if any(f is None for f in found):
        return _job_verdict(held)
    keys = {_key(window, f) for window, f in zip(held, found, strict=True) if f is not None}
    if len(keys) != 1:
        return _job_verdict(held)
    kind, ranks = keys.pop()
    return _verdict(kind, ranks, held, [f for f in found if f is not None])


def _judged(window: Sequence[RankWindow]) -> list[RankWindow]:
    return [r for r in window if r.steps >= MIN_STEPS]


def _standouts(window: Sequence[RankWindow]) -> list[_Standout] | None:
    """The ranks that stand out from the others' median in this window (None: none does)."""
    ranks = _judged(window)
    if len(ranks) < 2:
        return None
    step = _median([r.step_ms for r in ranks])
    if step is None:
        return None
    figures = [
        (figure, sign, _Others([v for r in ranks if (v := getattr(r, f"{figure}_ms")) is not None]))
        for figure, sign in (("wait", -1.0), ("step", 1.0), ("input", 1.0))
    ]
    found = []
    for rank in ranks:
        best = None
        for figure, sign, others in figures:
            out = _stands_out(rank, others, figure, sign, step)
            if out is not None and (best is None or out.gap_ms > best.gap_ms):
                best = out
        if best is not None:
            found.append(best)
    return found or None


class _Others:
    """One figure of a window's ranks, sorted once, so that each rank's "others" (every value
    but its own) give their median and MAD in O(1) each: a median of the others for each rank
    was the square of the ranks (8,000 ranks of a 1,000-node job: minutes, docs/jobs.md).
    Leaving out one value, the median of the rest is one of three; for each of those the
    deviations of all values are sorted once (and the rank's own left out of them alike)."""

    def __init__(self, values: list[float]) -> None:
        self.values = sorted(values)
        self._deviations: dict[float, list[float]] = {}

    def median(self, own: float) -> float | None:
        """The median of every value but one equal to ``own`` (None: no other)."""
        return _median_without(self.values, own)

    def mad(self, own: float, middle: float) -> float:
        """The MAD of every value but one equal to ``own``, about their median ``middle``."""
        deviations = self._deviations.get(middle)
        if deviations is None:
            deviations = sorted(abs(v - middle) for v in self.values)
            self._deviations[middle] = deviations
        mad = _median_without(deviations, abs(own - middle))
        return 0.0 if mad is None else mad


def _median_without(ordered: list[float], value: float) -> float | None:
    """statistics.median of ``ordered`` (sorted) less one element equal to ``value``: the
    rest's element j is ``ordered[j]`` where that is under ``value`` (before the one left
    out), else ``ordered[j + 1]``."""
    left = len(ordered) - 1
    if left < 1:
        return None
    half = left // 2
    upper = ordered[half] if ordered[half] < value else ordered[half + 1]
    if left % 2 == 1:
        return upper
    lower = ordered[half - 1] if ordered[half - 1] < value else ordered[half]
    return (lower + upper) / 2


def _stands_out(
    rank: RankWindow, others: _Others, figure: str, sign: float, step_ms: float
) -> _Standout | None:
    """``rank`` against the others on one figure: a gap over the line, or None. ``sign`` -1:
    the rank stands out by less (its wait in collectives), +1 by more (its step, its input)."""
    own = getattr(rank, f"{figure}_ms")
    middle = None if own is None else others.median(own)
    if own is None or middle is None:
        return None
    gap = sign * (own - middle)
    floor = max(GAP_SHARE * step_ms, GAP_MIN_MS)
    if gap < floor:  # under the line whatever the MAD: most ranks end here, before it
        return None
    line = max(floor, MAD_K * MAD_TO_SIGMA * others.mad(own, middle))
    return _Standout(rank, figure, own, middle, gap, line) if gap >= line else None


def _slow_node(held: list[list[RankWindow]]) -> Verdict | None:
    """The node tier, as the alerts' node rules have it (docs/prometheus/rules.yml): one node
    of two ranks or more whose rank that stands out least still stands out from the other
    nodes (at 2 nodes the other node's median; with more, the median of every node's median)
    by the line's share of the step on one figure, the same node in each held window.

    Not each of its ranks against every other rank with a MAD scale, as a rank is: with half
    the ranks slow, the others' median falls on the edge of the fast half and their MAD is
    that half's whole range. 8 gloo ranks on two namespaces beside two busy loops, node 1
    computing +30 ms a step (2026-12-06 06:20 UTC): its ranks waited 28 ms under the others'
    median against a line of 27 ms (4.45 x a MAD of 6 ms: node 0's waits 113-119 ms), and the
    node was named in 17 and 24 of 30 lines (FSDP2, DDP); docs/ranks.md."""
    found = [_node_standout(window) for window in held]
    nodes = {f.rank.node for f in found if f is not None}
    if any(f is None for f in found) or len(nodes) != 1:
        return None
    node = nodes.pop()
    ranks = tuple(sorted(r.rank for r in _judged(held[-1]) if r.node == node))
    return _verdict("node", ranks, held, [[f] for f in found if f is not None], of_nodes=True)


def _node_standout(window: Sequence[RankWindow]) -> _Standout | None:
    """The one node standing out in a window, as its rank that stands out least (None: none,
    or more than one)."""
    ranks = _judged(window)
    step = _median([r.step_ms for r in ranks])
    by_node: dict[str, list[RankWindow]] = {}
    for rank in ranks:
        by_node.setdefault(rank.node, []).append(rank)
    if step is None or len(by_node) < 2:
        return None
    floor = max(GAP_SHARE * step, GAP_MIN_MS)
    standing: dict[str, _Standout] = {}
    for figure, sign in (("wait", -1.0), ("step", 1.0), ("input", 1.0)):
        medians = {
            node: m
            for node, of_node in by_node.items()
            if (m := _median([getattr(r, f"{figure}_ms") for r in of_node])) is not None
        }
        if len(medians) < 2:
            continue
        for node, of_node in by_node.items():
            known = [r for r in of_node if getattr(r, f"{figure}_ms") is not None]
            if len(of_node) < 2 or len(known) < len(of_node):
                continue
            least = min(known, key=lambda r: sign * getattr(r, f"{figure}_ms"))
            own = getattr(least, f"{figure}_ms")
            others = (
                next(m for n, m in medians.items() if n != node)
                if len(medians) == 2
                else statistics.median(medians.values())
            )
            gap = sign * (own - others)
            if gap >= floor and (node not in standing or gap > standing[node].gap_ms):
                standing[node] = _Standout(least, figure, own, others, gap, floor)
    return next(iter(standing.values())) if len(standing) == 1 else None


def _key(
    window: Sequence[RankWindow], found: list[_Standout]
) -> tuple[Literal["rank", "node"], tuple[int, ...]]:
    """What stands out in a window: a whole node (two ranks or more, every one of that node,
    with other nodes beside), else the ranks themselves."""
    ranks = tuple(sorted(s.rank.rank for s in found))
    nodes = {s.rank.node for s in found}
    judged = _judged(window)
    if len(nodes) == 1 and len(ranks) >= 2:
        node = next(iter(nodes))
        of_node = tuple(sorted(r.rank for r in judged if r.node == node))
        if of_node == ranks and any(r.node != node for r in judged):
            return "node", ranks
    return "rank", ranks


def _verdict(
    kind: Literal["rank", "node"],
    ranks: tuple[int, ...],
    held: list[list[RankWindow]],
    found: list[list[_Standout]],
    of_nodes: bool = False,
) -> Verdict:
    """The verdict on ``ranks``, its figures the medians over the held windows; ``of_nodes``:
    held against the other nodes, by the share of the step alone (``_slow_node``)."""
    gap = statistics.median(statistics.median(s.gap_ms for s in f) for f in found)
    step = statistics.median(_median([r.step_ms for r in _judged(w)]) or 0.0 for w in held)
    last = found[-1]
    node = (
        next(iter({s.rank.node for s in last})) if len({s.rank.node for s in last}) == 1 else None
    )
    cause, covers = _cause(ranks, held, gap)
    one = len(ranks) == 1
    its, it = ("its", "it") if one else ("their", "them")
    who = (
        f"node {node} (ranks {_listed(ranks)})"
        if kind == "node"
        else f"rank{'' if one else 's'} {_listed(ranks)}" + (f" on {node}" if node else "")
    )
    lead = max(last, key=lambda s: s.gap_ms)
    most = "" if one else " the most"
    others = "the other nodes'" if of_nodes else "the others'"
    figures = f"{_ms(lead.own_ms)}{most}, {others} median {_ms(lead.others_ms)}"
    figure = {
        "wait": f"the other ranks wait {_ms(gap)} a step for {it} in collectives ({its} wait "
        f"{figures})",
        "step": f"{its} step is {_ms(gap)} longer ({figures})",
        "input": f"{its} input takes {_ms(gap)} a step more ({figures})",
    }[lead.figure]
    if cause is not None and cause == lead.figure:
        covers = f"{its} {cause} covers the gap"
    spread = "" if of_nodes else f", or {MAD_K:g} MADs of the others"
    evidence = (
        f"{who}: {figure}, over the line of {_ms(lead.line_ms)} ({GAP_SHARE:.0%} of the "
        f"{_ms(step)} step{spread}) in each of the last "
        f"{HOLD_WINDOWS} windows; " + (covers or "no measured cause covers most of the gap")
    )
    return Verdict(kind, ranks, node, cause, gap, step, evidence)


def _cause(
    ranks: tuple[int, ...], held: list[list[RankWindow]], gap: float
) -> tuple[str | None, str | None]:
    """What covers CAUSE_COVERS of the gap on the named ranks against the others (medians over
    the held windows): their input, else their own compute; with the words that say so."""
    named = set(ranks)
    for name, part in (("input", _input), ("compute", _compute)):
        own, others = [], []
        for window in held:
            judged = _judged(window)
            own.append(_median([part(r) for r in judged if r.rank in named]))
            others.append(_median([part(r) for r in judged if r.rank not in named]))
        mine, theirs = _median(own), _median(others)
        if mine is not None and theirs is not None and mine - theirs >= CAUSE_COVERS * gap:
            return name, (
                f"{'its' if len(ranks) == 1 else 'their'} {name} takes {_ms(mine)} a step, "
                f"the other ranks' {_ms(theirs)} (median): it covers the gap"
            )
    return None, None


def _input(rank: RankWindow) -> float | None:
    return rank.input_ms


def _compute(rank: RankWindow) -> float | None:
    """Its own work: given, else its step less its input and its wait in collectives (none
    where not measured: ranks that do not meet)."""
    if rank.compute_ms is not None:
        return rank.compute_ms
    if rank.step_ms is None:
        return None
    return max(0.0, rank.step_ms - (rank.input_ms or 0.0) - (rank.wait_ms or 0.0))


def _job_verdict(held: list[list[RankWindow]]) -> Verdict | None:
    """No rank stands out; the job itself is input-bound where even its least-waiting rank
    spends JOB_INPUT_SHARE of its step on its input in every held window."""
    shares, inputs, steps = [], [], []
    for window in held:
        judged = _judged(window)
        step = _median([r.step_ms for r in judged])
        least = min((r.input_ms for r in judged if r.input_ms is not None), default=None)
        if step is None or step <= 0 or least is None or len(judged) < 2:
            return None
        shares.append(least / step)
        inputs.append(_median([r.input_ms for r in judged]) or 0.0)
        steps.append(step)
    if min(shares) < JOB_INPUT_SHARE:
        return None
    ranks = tuple(sorted({r.rank for r in _judged(held[-1])}))
    gap, step = statistics.median(inputs), statistics.median(steps)
    return Verdict(
        "job",
        ranks,
        None,
        "input",
        gap,
        step,
        f"every rank waits on its input: the least {min(shares):.0%} of the {_ms(step)} step, "
        f"the median rank {_ms(gap)}, in each of the last {HOLD_WINDOWS} windows; no rank "
        "stands out: the job is input-bound, not a straggler",
    )


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ms(value: float) -> str:
    return f"{value:.1f} ms"


def _listed(ranks: tuple[int, ...]) -> str:
    return ", ".join(str(r) for r in ranks)
