"""The straggler verdict (advise/rank_verdict.py) on synthetic windows: each rank against the
others' median with a MAD scale, held over windows; a slow node named as a node; all ranks
slower together never a straggler."""

from __future__ import annotations

import pytest

from gputop_train.advise.rank_verdict import HOLD_WINDOWS, RankWindow, judge


def window(
    waits: list[float],
    step: float = 56.0,
    inputs: list[float] | None = None,
    nodes: list[str] | None = None,
    steps: int = 20,
) -> list[RankWindow]:
    """One window of ranks 0..n-1 of a job that meets every step (equal step times)."""
    inputs = inputs or [1.0] * len(waits)
    nodes = nodes or ["node-0"] * len(waits)
    return [
        RankWindow(rank, nodes[rank], steps, step, wait, inputs[rank])
        for rank, wait in enumerate(waits)
    ]


def held(*windows: list[RankWindow]) -> list[list[RankWindow]]:
    return list(windows)


def test_unslowed_ranks_jittering_name_nobody() -> None:
    history = held(window([30.0, 31.5]), window([32.0, 29.0]), window([30.5, 30.0]))
    assert judge(history) is None


def test_a_rank_the_others_wait_for_is_named_with_its_compute() -> None:
    slowed = window([30.0, 2.0, 32.0, 31.0])
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None
    assert (verdict.kind, verdict.ranks, verdict.node) == ("rank", (1,), "node-0")
    assert verdict.cause == "compute"
    assert verdict.gap_ms == pytest.approx(29.0)
    assert verdict.step_ms == pytest.approx(56.0)
    assert "rank 1 on node-0" in verdict.evidence and "29.0 ms" in verdict.evidence


def test_a_rank_slowed_in_its_input_is_named_for_it() -> None:
    slowed = window([30.0, 1.0, 31.0, 30.0], inputs=[1.0, 31.0, 1.5, 1.0])
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None and verdict.ranks == (1,) and verdict.cause == "input"
    assert "its input takes" in verdict.evidence


def test_named_only_when_it_holds_in_every_held_window() -> None:
    calm, lagging = window([30.0, 30.0, 31.0, 30.0]), window([30.0, 2.0, 31.0, 30.0])
    assert judge([lagging, calm, lagging]) is None
    assert judge([lagging, lagging]) is None  # a young job: fewer windows than the hold
    assert judge([calm, lagging, lagging, lagging]) is not None  # the last windows count


def test_a_lag_moving_from_rank_to_rank_names_nobody() -> None:
    one, other = window([30.0, 2.0, 31.0, 30.0]), window([2.0, 30.0, 31.0, 30.0])
    assert judge([one, other, one]) is None


def test_a_slow_node_is_named_as_a_node() -> None:
    nodes = ["gpu-node-0", "gpu-node-0", "gpu-node-1", "gpu-node-1"]
    slowed = window([30.0, 31.0, 1.0, 1.5], nodes=nodes)
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None
    assert (verdict.kind, verdict.ranks, verdict.node) == ("node", (2, 3), "gpu-node-1")
    assert "node gpu-node-1 (ranks 2, 3)" in verdict.evidence


def test_a_slow_node_of_four_ranks_among_eight() -> None:
    nodes = ["a"] * 4 + ["b"] * 4
    slowed = window([30.0, 31.0, 29.0, 30.5, 1.0, 1.2, 0.8, 1.1], nodes=nodes)
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None and (verdict.kind, verdict.node) == ("node", "b")
    assert verdict.ranks == (4, 5, 6, 7)


def test_one_rank_of_a_node_is_a_rank_not_the_node() -> None:
    nodes = ["a", "a", "b", "b"]
    verdict = judge([window([30.0, 31.0, 30.0, 1.0], nodes=nodes)] * HOLD_WINDOWS)
    assert verdict is not None and (verdict.kind, verdict.ranks, verdict.node) == (
        "rank",
        (3,),
        "b",
    )


def test_one_rank_per_node_is_named_as_its_rank_with_its_node() -> None:
    verdict = judge([window([30.0, 1.0], nodes=["a", "b"])] * HOLD_WINDOWS)
    assert verdict is not None and (verdict.kind, verdict.ranks, verdict.node) == (
        "rank",
        (1,),
        "b",
    )


def test_all_ranks_slower_together_is_no_straggler() -> None:
    together = window([0.5, 0.6, 0.4, 0.5], step=120.0)
    assert judge([together] * HOLD_WINDOWS) is None


def test_every_rank_waiting_on_its_input_is_the_jobs_finding() -> None:
    bound = window([1.0, 1.2, 0.9, 1.0], step=100.0, inputs=[40.0, 42.0, 39.0, 41.0])
    verdict = judge([bound] * HOLD_WINDOWS)
    assert verdict is not None
    assert (verdict.kind, verdict.cause, verdict.ranks) == ("job", "input", (0, 1, 2, 3))
    assert "not a straggler" in verdict.evidence


def test_the_others_spread_sets_the_line_with_many_ranks() -> None:
    """Eight ranks whose waits spread 15-45 ms (a loaded box): a rank 12 ms under their median
    is within 3 MADs (the 10% line alone, 5.6 ms, would name it)."""
    spread = window([15.0, 30.0, 18.0, 45.0, 40.0, 22.0, 38.0, 25.0])
    assert judge([spread] * HOLD_WINDOWS) is None
    far = window([30.0, 31.0, 29.0, 32.0, 30.0, 28.0, 31.0, 1.0])
    assert judge([far] * HOLD_WINDOWS) is not None


def test_ranks_that_do_not_meet_stand_out_by_their_step() -> None:
    apart = [RankWindow(r, "a", 20, ms, None, 0.0) for r, ms in enumerate([50.0, 80.0, 51.0])]
    verdict = judge([apart] * HOLD_WINDOWS)
    assert verdict is not None and verdict.ranks == (1,)
    assert "its step is" in verdict.evidence


def test_a_gap_no_measurement_covers_has_no_cause() -> None:
    slowed = [
        RankWindow(0, "a", 20, 56.0, 30.0, 1.0, compute_ms=25.0),
        RankWindow(1, "a", 20, 56.0, 2.0, 1.0, compute_ms=26.0),
    ]
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None and verdict.cause is None
    assert "no measured cause covers most of the gap" in verdict.evidence


def test_ranks_with_too_few_steps_are_not_judged() -> None:
    few = window([30.0, 2.0], steps=3)
    assert judge([few] * HOLD_WINDOWS) is None


def test_the_verdict_has_no_session_import() -> None:
    """The job view that reads Prometheus calls it with figures of its own."""
    import ast
    import pathlib

    import gputop_train.advise.rank_verdict as module

    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert all(
        not name.startswith(".")
        and name.split(".")[0]
        in {"__future__", "statistics", "collections", "dataclasses", "typing"}
        for name in imported
    )


def test_the_session_keeps_the_span_the_verdict_holds_over() -> None:
    from gputop_train.session import comm

    assert comm.HOLD_WINDOWS == HOLD_WINDOWS


def test_the_advisor_names_what_the_verdict_names() -> None:
    """The node's advisor reads the same verdict: a slow node of the ranks it sees is named as
    a node, with the ranks in the finding (the job view and the alerts read the same rule)."""
    from gputop_train.advise import rules, stragglers
    from gputop_train.session.comm import CommStats
    from gputop_train.session.stats import RankIdentity, RankStats, StepStats
    from tests.support.observations import observe
    from tests.support.ranks import held_steps

    def rank(index: int, host: str, wait_ms: float) -> RankStats:
        figures = StepStats(30, 18.0, 144.0, 56.0, 56.0, 1.0, None)
        who = RankIdentity(100 + index, index, index, host)
        comm = CommStats(30, wait_ms, wait_ms, 100 * wait_ms / 56.0)
        return RankStats(who, figures, 30, 240, (), comm, held_steps([wait_ms] * 30, 56.0, 0.5))

    o = observe(
        ranks=(rank(0, "a", 30.0), rank(1, "a", 31.0), rank(2, "b", 1.0), rank(3, "b", 1.2))
    )
    verdict = stragglers.verdict_of(o)
    found = rules.straggler(o)
    assert verdict is not None and found is not None
    assert (verdict.kind, verdict.node, found.ranks) == ("node", "b", (2, 3))
    assert found.title == (
        "Slow node: node b (ranks 2, 3) compute slower, and the other nodes' ranks wait for them"
    )
    assert found.evidence[0] == verdict.evidence


def test_a_slow_node_is_named_though_the_fast_nodes_waits_spread() -> None:
    """The figures of 8 gloo ranks across two namespaces beside two busy loops, node 1
    computing +30 ms a step (2026-12-06): node 0's waits spread 113-119 ms, so each of node 1's
    ranks stood 28 ms under the others' median against a MAD line of 27 ms, and the rank tier
    named the node in every other line. Held against node 0's median, node 1 is named."""
    nodes = ["0"] * 4 + ["1"] * 4
    history = [
        window([113.0, 115.0, 116.0, 119.0, 83.0, 85.0, 86.0, 88.0], step=140.0, nodes=nodes),
        window([116.0, 118.0, 117.0, 119.0, 84.0, 88.0, 89.0, 85.0], step=146.0, nodes=nodes),
        window([110.0, 108.0, 109.0, 107.0, 80.0, 79.0, 77.0, 78.0], step=136.0, nodes=nodes),
    ]
    verdict = judge(history)
    assert verdict is not None
    assert (verdict.kind, verdict.ranks, verdict.node) == ("node", (4, 5, 6, 7), "1")
    assert "the other nodes' median" in verdict.evidence and "MADs" not in verdict.evidence


def test_a_node_is_named_only_when_its_every_rank_stands_out() -> None:
    """One rank of node 1 waits like node 0's: that node's rank that stands out least does not,
    and the rank tier names the three that do as ranks, not the node."""
    nodes = ["0"] * 4 + ["1"] * 4
    slowed = window([115.0, 116.0, 114.0, 117.0, 85.0, 86.0, 84.0, 114.0], step=140, nodes=nodes)
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is None or verdict.kind == "rank"


def test_nodes_jittering_apart_by_under_the_line_name_nothing() -> None:
    """Unslowed: one node's ranks all wait a little less than the other's (under 10% of the
    step), in every window."""
    nodes = ["0"] * 4 + ["1"] * 4
    close = window([30.0, 31.0, 32.0, 30.5, 26.0, 25.5, 27.0, 26.5], step=56.0, nodes=nodes)
    assert judge([close] * HOLD_WINDOWS) is None


def test_of_three_nodes_the_slow_one_is_held_against_the_median_node() -> None:
    nodes = ["0", "0", "1", "1", "2", "2"]
    slowed = window([60.0, 61.0, 58.0, 59.0, 30.0, 31.0], step=100.0, nodes=nodes)
    verdict = judge([slowed] * HOLD_WINDOWS)
    assert verdict is not None and (verdict.kind, verdict.node) == ("node", "2")
