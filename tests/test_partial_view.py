"""A node's monitor sees some of a job's ranks (issue 30, point 6): its input findings say
that the other nodes' ranks may wait less (this node's input a straggler) and count for less;
a monitor that sees every rank is unchanged."""

from __future__ import annotations

from gputop_train.advise import rules
from gputop_train.events import ProcessHello
from tests.support.observations import RUNG0, observe


def test_an_input_finding_seen_from_one_node_of_several_says_so() -> None:
    alone = rules.findings(observe(**RUNG0))[0]
    partial = rules.findings(observe(**RUNG0, world_size=4))[0]
    assert alone.id == partial.id == "input.more_workers"
    assert partial.evidence[:-1] == alone.evidence
    assert partial.evidence[-1] == (
        "this monitor sees 1 of the job's 4 ranks (WORLD_SIZE; hook): the other nodes' ranks "
        "may wait less"
    )
    assert "this node's input is a straggler" in partial.action
    assert partial.changes == alone.changes  # the fix is still the same knob
    assert partial.confidence < alone.confidence


def test_a_monitor_that_sees_every_rank_is_unchanged() -> None:
    assert rules.findings(observe(**RUNG0, world_size=1)) == rules.findings(observe(**RUNG0))


def test_the_hello_carries_the_world_size_and_a_bad_one_is_unknown() -> None:
    assert ProcessHello.of(7, {"rank": 0, "world_size": 4}).world_size == 4
    assert ProcessHello.of(7, {"rank": 0, "world_size": "four"}).world_size is None
