"""From the job's samples to its view: the straggler verdict over disjoint windows (the one
rule of advise/rank_verdict.py, as the node's advisor and the alerts use it), each node's
row with its worst rank, the nodes worst first, and where to ssh.

Each sample's figures are medians over the nodes' monitors' window (``window_s``, 10 s by
default); the verdict's windows are samples at least ``window_s`` apart, so they do not
overlap, and a window's steps are the ranks' step counters' increase over it. At least, not
the nearest to a window apart: read from Prometheus, a node's counter moves only at its
scrape, and two samples under a scrape apart held the same scrape for some nodes, whose ranks
then counted no steps and were not judged (the 1,000-node run of 2026-12-06: 2,256 of 8,000
in one window, the slowed rank's among them; docs/jobs.md "Scale"). Even a window apart they
can, where a scrape lands late or fails: those ranks' steps are counted from an older sample.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence

from ..advise.rank_verdict import HOLD_WINDOWS, RankWindow, Verdict, judge
from .figures import JobSample, NodeFigures, RankFigures
from .view import JobFinding, JobView, NodeRow, RankRow, down_state, node_name, where

DEFAULT_WINDOW_S = 10.0  # the monitors' --window: their figures are medians over it
_Built = tuple[JobSample, JobSample, list[RankWindow]]  # a window's end and start samples, built


class JobHistory:
    """The samples of the last HOLD_WINDOWS + 1 windows; ``view`` judges the latest."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[JobSample] = deque()
        self._judge = _VerdictWorker()
        self._built: dict[tuple[int, int], _Built] = {}

    def add(self, sample: JobSample) -> None:
        self._samples.append(sample)
        keep = (HOLD_WINDOWS + 1.5) * self.window_s
        while self._samples and self._samples[0].at < sample.at - keep:
            self._samples.popleft()

    def windows(self) -> list[list[RankWindow]]:
        """The verdict's windows, oldest first: back from the latest sample, each window's
        start the newest sample a window or more (up to two) before its end, each window with
        its ranks' steps over it."""
        if not self._samples:
            return []
        ends: list[JobSample | None] = [self._samples[-1]]
        for _ in range(HOLD_WINDOWS):
            last = ends[-1]
            ends.append(None if last is None else self._before(last.at - self.window_s))
        windows = []
        built: dict[tuple[int, int], _Built] = {}
        for end, start in itertools.pairwise(ends):
            if end is None or start is None:
                break
            key = (id(end), id(start))  # the entry holds both samples: the ids stay theirs
            found = self._built.get(key)
            window = found[2] if found is not None else _rank_windows(end, self._from(start, end))
            built[key] = (end, start, window)
            windows.append(window)
        self._built = built  # a window is built once, not at each refresh that holds it
        return windows[::-1]

    def _from(self, start: JobSample, end: JobSample) -> list[JobSample]:
        """The window's start, then the older samples up to two windows before its end,
        newest first: where a rank's steps are counted from."""
        older = [s for s in self._samples if end.at - 2 * self.window_s - 1e-6 <= s.at < start.at]
        return [start, *older[::-1]]

    def _before(self, at: float) -> JobSample | None:
        """The newest sample read at ``at`` or before, and no more than a window before it."""
        for sample in reversed(self._samples):
            if sample.at <= at + 1e-6:
                return sample if sample.at >= at - self.window_s else None
        return None

    def view(self, source: str) -> JobView:
        """The view of the latest sample, judged over the history."""
        sample = self._samples[-1]
        windows = self.windows()
        verdict, age = self._judge.latest(windows) if len(windows) >= HOLD_WINDOWS else (None, 0.0)
        return build_view(sample, source, verdict, len(windows), age)


# The verdict takes ~0.2 s at 8,000 ranks on the dev box (advise/rank_verdict.py, O(n log n)
# since 2026-12-05; docs/jobs.md "Scale"), more on a loaded box: a refresh waits for it this
# long, then shows the rows with the last verdict that finished, and says its age, while the
# new one runs on.
VERDICT_BUDGET_S = 0.5


class _VerdictWorker:
    """Runs ``judge`` on a thread of its own, one at a time; ``latest`` waits up to
    VERDICT_BUDGET_S for the one it starts, else answers with the last that finished."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None
        self._last: tuple[Verdict | None, float] | None = None  # the verdict, when judged

    def latest(self, windows: list[list[RankWindow]]) -> tuple[Verdict | None, float]:
        """The verdict and its age (s): 0 where judged on these windows."""
        with self._lock:
            if self._running is None or not self._running.is_alive():
                asked = time.monotonic()
                self._running = threading.Thread(
                    target=self._judge, args=(windows, asked), daemon=True, name="verdict"
                )
                self._running.start()
            running = self._running
        running.join(VERDICT_BUDGET_S)
        with self._lock:
            if self._last is None:
                return None, 0.0
            verdict, at = self._last
            return verdict, 0.0 if not running.is_alive() else time.monotonic() - at

    def _judge(self, windows: list[list[RankWindow]], asked: float) -> None:
        verdict = judge(windows)
        with self._lock:
            self._last = (verdict, asked)


def _rank_windows(end: JobSample, starts: Sequence[JobSample]) -> list[RankWindow]:
    """Each rank of ``end`` over the window from ``starts[0]``; where that sample holds no
    newer scrape of the rank's node than ``end`` (a scrape that landed late: up to 8.3 s at
    1,000 nodes on the loaded dev box, 2026-12-06 03:27), or none (it failed), from the next
    older of ``starts`` that does: its step counter moved. (A rank that stopped stepping is
    told from a late scrape only by that: it is judged on its last steps up to two windows
    back, then not.)"""
    befores: list[dict[tuple[str, int], float | None]] = []

    def steps(rank: RankFigures) -> int:
        for i, start in enumerate(starts):
            if i == len(befores):  # built only where a rank needs it
                befores.append({r.key: r.steps_total for r in start.ranks})
            if (counted := _steps(rank.steps_total, befores[i].get(rank.key))) > 0:
                return counted
        return 0

    return [
        RankWindow(
            rank=r.rank,
            node=node_name(r.node),
            steps=steps(r),
            step_ms=r.step_ms,
            wait_ms=r.comm_ms,
            input_ms=r.input_ms,
        )
        for r in end.ranks
        if r.rank is not None and r.connected
    ]


def _steps(now: float | None, before: float | None) -> int:
    return int(now - before) if now is not None and before is not None else 0


def build_view(
    sample: JobSample, source: str, verdict: Verdict | None, windows: int, age_s: float = 0.0
) -> JobView:
    """The job's rows and findings at ``sample``, with ``verdict`` (None: none named), judged
    ``age_s`` seconds ago."""
    ranks = [r for r in sample.ranks if r.connected] or list(sample.ranks)
    job_step = _median(r.step_ms for r in ranks)
    others = _OthersMedians(ranks)
    rows = tuple(sorted((_rank_row(r, others) for r in sample.ranks), key=_rank_order))
    findings = list(_verdict_findings(verdict, sample))
    named = {f.node for f in findings}
    by_node: dict[tuple[str, str], list[RankRow]] = {}
    for row in rows:
        by_node.setdefault((row.node, row.host), []).append(row)
    nodes = tuple(
        sorted(
            (_node_row(n, by_node.get((n.node, n.host), []), verdict) for n in sample.nodes),
            key=lambda n: (
                n.node not in named,
                n.down_reason is None,  # a node not answering next: the verdict lacks it
                -(n.lag_ms or 0.0),
                _natural(n.node),
            ),
        )
    )
    findings += _state_findings(sample)
    sizes = [n.world_size for n in sample.nodes if n.world_size]
    return JobView(
        job=sample.job,
        at=sample.at,
        source=source,
        nodes=nodes,
        ranks=rows,
        findings=tuple(findings),
        step_ms=job_step,
        world_size=max(sizes) if sizes else None,
        windows=windows,
        verdict_age_s=age_s,
        judged_without=tuple(n.node for n in sample.nodes if n.down_reason is not None),
    )


class _OthersMedians:
    """The median of the other ranks' figure, for each rank, in O(log n) a rank (8,000 ranks
    of a 1,000-node job: a median of the others each would be 64 million steps)."""

    def __init__(self, ranks: Sequence[RankFigures]) -> None:
        self._sorted = {
            name: sorted(v for r in ranks if (v := getattr(r, name)) is not None)
            for name in ("input_ms", "comm_ms", "step_ms")
        }
        self._keys = {r.key for r in ranks}
        # A rank not among them (gone, or its figure not measured): the median of all, once
        # (a median each was the square of the ranks where many were gone).
        self._all = {name: _median(values) for name, values in self._sorted.items()}

    def of(self, rank: RankFigures, name: str) -> float | None:
        values = self._sorted[name]
        own = getattr(rank, name)
        if own is None or rank.key not in self._keys:  # not among them: the median of all
            return self._all[name]
        remaining = len(values) - 1
        if remaining < 1:
            return None
        at = bisect.bisect_left(values, own)
        low, high = (remaining - 1) // 2, remaining // 2  # the others' middle, without it
        return (values[low + (low >= at)] + values[high + (high >= at)]) / 2.0


def _rank_row(rank: RankFigures, others: _OthersMedians) -> RankRow:
    """The rank's row, with its lag: its worst figure against the other ranks' median."""
    lags = {
        "input": _minus(rank.input_ms, others.of(rank, "input_ms")),
        "compute": _minus(others.of(rank, "comm_ms"), rank.comm_ms),
        "step": _minus(rank.step_ms, others.of(rank, "step_ms")),
    }
    known = {cause: lag for cause, lag in lags.items() if lag is not None and lag > 0}
    cause = max(known, key=lambda c: known[c]) if known else None
    return RankRow(
        rank=rank.rank,
        node=rank.node,
        host=rank.host,
        pid=rank.pid,
        gpu=rank.gpu,
        step_ms=rank.step_ms,
        data_wait_pct=rank.data_wait_pct,
        input_ms=rank.input_ms,
        comm_ms=rank.comm_ms,
        comm_pct=rank.comm_pct,
        connected=rank.connected,
        lag_ms=known[cause] if cause else None,
        lag_cause=cause,
    )


def _node_row(node: NodeFigures, mine: Sequence[RankRow], verdict: Verdict | None) -> NodeRow:
    """The node's row from its ranks' rows ``mine``."""
    worst = max(mine, key=lambda r: r.lag_ms or 0.0, default=None)
    named = (
        [r for r in mine if r.rank in set(verdict.ranks)]
        if verdict and verdict.kind != "job"
        else []
    )
    if named:  # the verdict's rank on this node is its worst, with the verdict's cause
        worst = max(named, key=lambda r: r.lag_ms or 0.0)
    if node.down_reason is not None:
        state = down_state(node.down_since, node.down_reason)
    elif node.running is None and not mine:
        state = "not answering"
    elif node.running is False:
        state = f"ended (exit {node.exit_code:g})" if node.exit_code is not None else "ended"
    else:
        state = "running"
    cause = (verdict.cause or worst.lag_cause) if named and verdict and worst else None
    return NodeRow(
        node=node.node,
        host=node.host,
        ranks=tuple(sorted(r.rank for r in mine if r.rank is not None)),
        step_ms=_median(r.step_ms for r in mine),
        data_wait_pct=_median(r.data_wait_pct for r in mine),
        comm_ms=_median(r.comm_ms for r in mine),
        comm_pct=_median(r.comm_pct for r in mine),
        gpu_util_pct=node.gpu_util_pct,
        worst_rank=worst.rank if worst and worst.lag_ms else None,
        worst_cause=cause or (worst.lag_cause if worst else None),
        lag_ms=worst.lag_ms if worst else None,
        state=state,
        down_since=node.down_since,
        down_reason=node.down_reason,
    )


CAUSES = {
    "input": "waits on its input",
    "compute": "computes slower",
    "step": "steps slower",
    None: "cause not measured",
}


def _verdict_findings(verdict: Verdict | None, sample: JobSample) -> Iterable[JobFinding]:
    """The verdict as a finding, with the node's host and the command to attach there."""
    if verdict is None:
        return
    if verdict.kind == "job":
        yield JobFinding(
            kind="job",
            text=f"the whole job is {verdict.cause or 'slow'}-bound, no straggler",
            ranks=verdict.ranks,
            cause=verdict.cause,
            gap_ms=verdict.gap_ms,
            step_ms=verdict.step_ms,
            evidence=verdict.evidence,
        )
        return
    wanted = set(verdict.ranks)
    named = [r for r in sample.ranks if r.rank in wanted and r.connected]
    nodes = {(r.node, r.host) for r in named}
    node, host = next(iter(nodes)) if len(nodes) == 1 else (None, None)
    first = min(named, key=lambda r: r.rank or 0, default=None)
    ssh = f"ssh -t {first.host} gputop-train attach {first.pid}" if first else None
    cost = f"the job loses {verdict.gap_ms:.1f} ms of each {verdict.step_ms:.1f} ms step"
    cause = CAUSES.get(verdict.cause, verdict.cause or "")
    if verdict.kind == "node":
        text = f"slow node: {where(node, host)}, all its ranks ({_listed(verdict.ranks)}) {cause}"
        kind = "slow_node"
    else:
        one = len(verdict.ranks) == 1
        who = f"rank{'' if one else 's'} {_listed(verdict.ranks)}"
        text = f"straggler: {who} on {where(node, host)} {cause}"
        kind = "straggler"
    yield JobFinding(
        kind=kind,
        text=f"{text}; {cost}",
        rank=first.rank if first else None,
        ranks=verdict.ranks,
        node=node,
        host=host,
        cause=verdict.cause,
        gap_ms=verdict.gap_ms,
        step_ms=verdict.step_ms,
        evidence=verdict.evidence,
        ssh=ssh,
    )


def _state_findings(sample: JobSample) -> list[JobFinding]:
    """Nodes whose job ended, nodes not answering (judged without), what else could not be
    read."""
    found = [
        JobFinding(
            kind="ended",
            text=f"{where(n.node, n.host)}: the job ended"
            + (f" (exit {n.exit_code:g})" if n.exit_code is not None else ""),
            node=n.node,
            host=n.host,
        )
        for n in sample.nodes
        if n.running is False and n.down_reason is None
    ]
    found += [
        JobFinding(
            kind="unreachable",
            text=f"{where(n.node, n.host)}: {down_state(n.down_since, n.down_reason)}; "
            "the verdict judged without it",
            node=n.node,
            host=n.host,
        )
        for n in sample.nodes
        if n.down_reason is not None
    ]
    found += [JobFinding(kind="unreachable", text=problem) for problem in sample.problems]
    return found


def _rank_order(row: RankRow) -> tuple[int, str, int]:
    return (row.rank if row.rank is not None else 1 << 30, row.host, row.pid)


def _natural(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _listed(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks))
