"""Knobs: validated twice, applied at a step boundary, acknowledged, reverted on failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.hook.knobs import Knob, KnobBoard
from tests.support.waiting import wait_until


def acks(board: KnobBoard) -> list[dict[str, Any]]:
    frames = [json.loads(f) for f in board.take_outbox()]
    return [f for f in frames if f["type"] == wire.KNOB_APPLIED]


def make_board(applied: list[Any], fail_on: Any = None) -> KnobBoard:
    def apply(value: Any) -> None:
        if value == fail_on:
            raise RuntimeError(f"cannot take {value}")
        applied.append(value)

    board = KnobBoard()
    board.declare(Knob("num_workers", 0, apply, minimum=0, maximum=16))
    board.declare(Knob("compile", False, lambda v: applied.append(("compile", v))))
    board.declare(Knob("input", "float", lambda v: None, choices=("float", "uint8")))
    board.take_outbox()
    return board


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ({"name": "w", "kind": "int", "min": 0, "max": 8}, "4", 4),
        ({"name": "c", "kind": "bool"}, "true", True),
        ({"name": "c", "kind": "bool"}, False, False),
        ({"name": "i", "kind": "choice", "choices": ["float", "uint8"]}, "uint8", "uint8"),
    ],
)
def test_typed_values_are_parsed_into_the_knobs_type(spec: dict, value: Any, expected: Any) -> None:
    assert wire.parse_knob(spec, value) == expected


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ({"name": "w", "kind": "int", "min": 0, "max": 8}, 9),
        ({"name": "w", "kind": "int", "min": 0, "max": 8}, "abc"),
        ({"name": "w", "kind": "int"}, 2.5),
        ({"name": "c", "kind": "bool"}, "maybe"),
        ({"name": "i", "kind": "choice", "choices": ["float"]}, "fp64"),
    ],
)
def test_bad_values_are_refused_with_a_reason(spec: dict, value: Any) -> None:
    with pytest.raises(ValueError, match=spec["name"]):
        wire.parse_knob(spec, value)
    with pytest.raises(ValueError, match=spec["name"]):
        wire.validate_knob(spec, value)


@pytest.mark.parametrize(
    "value", [True, "3", "1_000", 3.0, float("inf"), float("nan"), None, [3], {"v": 3}]
)
def test_the_wire_takes_only_a_whole_number_for_a_number(value: Any) -> None:
    # On the wire a number knob once took true, "3" and "1_000", and +-Infinity killed the
    # listener with an OverflowError (issue: hardening).
    with pytest.raises(ValueError, match="whole number"):
        wire.validate_knob({"name": "w", "kind": "int", "min": 0, "max": 64}, value)


def test_a_choice_must_match_in_type_and_a_refusal_is_short() -> None:
    spec = {"name": "level", "kind": "choice", "choices": [1, 2]}
    with pytest.raises(ValueError, match="level"):
        wire.validate_knob(spec, True)  # True == 1, but a switch is not a number
    with pytest.raises(ValueError) as refused:
        wire.validate_knob({"name": "w", "kind": "int"}, "x" * 2_000_000)
    assert len(str(refused.value)) < 200


def test_a_change_waits_for_the_step_boundary_and_is_acknowledged() -> None:
    applied: list[Any] = []
    board = make_board(applied)
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 1, "name": "num_workers", "value": 8})
    )
    assert applied == []  # the listener thread only queues it
    board.apply_pending(step=42)
    assert applied == [8]
    (ack,) = acks(board)
    assert ack["ok"] and ack["value"] == 8 and ack["previous"] == 0 and ack["step"] == 42


def test_a_bad_value_is_refused_at_once_and_nothing_changes() -> None:
    applied: list[Any] = []
    board = make_board(applied)
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 2, "name": "num_workers", "value": 99})
    )
    (ack,) = acks(board)
    assert not ack["ok"] and "0..16" in ack["error"] and ack["value"] == 0
    board.apply_pending(step=1)
    assert applied == []


@pytest.mark.parametrize(
    "frame",
    [
        {"id": 1, "name": "n" * 2_000_000, "value": 1},  # an unknown knob with a huge name
        {"id": 2, "name": "num_workers", "value": "v" * 2_000_000},  # a huge refused value
        {"id": float("nan"), "name": "num_workers", "value": 4},  # an id JSON cannot carry
        {"id": "i" * 2_000_000, "name": "num_workers", "value": 4},  # a huge id
        {"id": [[[[]]]], "name": {"a": 1}, "value": 4},  # ids and names of the wrong type
    ],
    ids=["huge-name", "huge-value", "nan-id", "huge-id", "wrong-types"],
)
def test_what_an_outcome_echoes_is_bounded_and_refusals_stay_out_of_the_history(
    frame: dict[str, Any],
) -> None:
    board = make_board([])
    board.request(wire.SetKnob.decode({"type": "set_knob", **frame}))
    board.apply_pending(step=3)
    frames = board.take_outbox()  # each one encodable (it was encoded), and small
    assert frames and all(len(f) < 1024 for f in frames)
    history = json.dumps([o.fields() for o in board.history], allow_nan=False)
    assert len(history) < 1024
    refused = [json.loads(f) for f in frames if not json.loads(f)["ok"]]
    assert all("seq" not in outcome for outcome in refused)  # not kept for later monitors


def test_a_callback_that_raises_reverts_to_the_previous_value() -> None:
    applied: list[Any] = []
    board = make_board(applied, fail_on=4)
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 3, "name": "num_workers", "value": 4})
    )
    board.apply_pending(step=7)
    (ack,) = acks(board)
    assert not ack["ok"] and "cannot take 4" in ack["error"]
    assert ack["value"] == 0 and board.knobs["num_workers"].value == 0
    assert applied == [0]  # the old value was put back


def test_a_failure_seen_later_reverts_the_last_change() -> None:
    applied: list[Any] = []
    board = make_board(applied)
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 4, "name": "num_workers", "value": 16})
    )
    board.apply_pending(step=10)
    acks(board)
    assert board.revert_last_change("OutOfMemoryError: CUDA out of memory", step=11)
    (ack,) = acks(board)
    assert ack["reverted"] and not ack["ok"] and ack["value"] == 0
    assert "OutOfMemoryError" in ack["error"]
    assert not board.revert_last_change("again", step=12)  # nothing left to revert


def test_a_change_that_survived_many_steps_is_no_longer_blamed() -> None:
    board = make_board([])
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 5, "name": "num_workers", "value": 2})
    )
    board.apply_pending(step=10)
    board.apply_pending(step=40)
    assert not board.revert_last_change("a bug of the script's own", step=41)


def test_a_schedule_applies_each_entry_at_its_step() -> None:
    applied: list[Any] = []
    board = make_board(applied)
    board.set_schedule(
        json.dumps(
            [
                {"step": 5, "set": {"num_workers": "2"}},
                {"step": 3, "set": {"compile": "true", "input": "uint8"}},
            ]
        )
    )
    for step in range(1, 7):
        board.apply_pending(step)
    outcomes = [(a["name"], a["value"], a["step"]) for a in acks(board)]
    assert outcomes == [("compile", True, 3), ("input", "uint8", 3), ("num_workers", 2, 5)]


def test_live_changes_reach_the_job_through_the_socket_and_apply_on_its_thread(
    tmp_path: Path,
) -> None:
    import os

    from gputop_train.job.launched import hook_environment
    from gputop_train.monitor.monitor import Monitor
    from gputop_train.session.model import Session
    from tests.support import torch_jobs
    from tests.support.paths import SCENARIOS

    output = tmp_path / "job.out"
    job = torch_jobs.spawn(
        [str(SCENARIOS), "knobbed", "steps=300"], env=hook_environment(os.environ), stdout=output
    )
    session = Session()
    monitor = Monitor(session, job.pid, psutil_module=None)
    monitor.start()
    try:
        wait_until(lambda: session.knob("step_ms") is not None, 60, "the job's knob advertised")
        assert monitor.request_knob("step_ms", 500) == "step_ms must be within 1..100, not 500"
        assert monitor.request_knob("step_ms", 20) is None
        assert monitor.request_knob("step_ms", 13) is None  # valid, but the script refuses it
        job.wait(timeout=60)
        out = output.read_text()
        monitor.drain(3.0)
    finally:
        monitor.stop()
        if job.poll() is None:
            job.kill()
    # 20 applied, then 13 raised and 20 was put back: every call on the training thread.
    assert "callbacks on the training thread: [True, True]" in out
    snap = session.snapshot(with_phases=True)
    assert [row.phase.change for row in snap.phases] == ["start", "step_ms=20"]
    assert snap.knobs[0].value == 20 and "13 is unlucky" in (snap.knobs[0].error or "")
