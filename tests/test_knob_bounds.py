"""What a client can make the hook hold is bounded, and a trial belongs to its monitor (issue 39).

The knob board on its own: changes for a far step refused with the reason, the waiting
changes bounded per client and in all, a leaving client's waiting changes dropped with an
outcome each, a step boundary that looks at the head of the waiting changes only, every
outcome told or counted, and a trial undone once the monitor that asked for it has left.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from gputop_train import wire
from gputop_train.hook import knobs
from gputop_train.hook.agent import Agent
from gputop_train.hook.knobs import Knob, KnobBoard
from gputop_train.hook.listener import MAX_CLIENTS


def _board(applied: list[Any] | None = None) -> KnobBoard:
    board = KnobBoard()
    sink = applied if applied is not None else []
    board.declare(Knob("n", 1, sink.append, minimum=0, maximum=10**6))
    board.take_outbox()
    return board


def _frames(board: KnobBoard) -> list[dict[str, Any]]:
    return [json.loads(frame) for frame in board.take_outbox()]


def _set(
    board: KnobBoard, value: int, client: int, at_step: int | None = None, **more: Any
) -> None:
    frame: dict[str, Any] = {"type": wire.SET_KNOB, "id": value, "name": "n", "value": value}
    if at_step is not None:
        frame["at_step"] = at_step
    board.request(wire.SetKnob.decode(frame | more), client)


def test_a_change_further_ahead_than_the_horizon_is_refused_with_the_reason() -> None:
    board = _board()
    board.apply_pending(step=10)
    _set(board, 2, client=1, at_step=10**15)
    (refusal,) = _frames(board)
    assert refusal["ok"] is False and refusal["step"] is None
    assert refusal["error"].startswith(f"{wire.TOO_FAR_AHEAD} {10**15}")
    assert f"at most {knobs.MAX_STEPS_AHEAD} steps ahead" in refusal["error"]
    _set(board, 3, client=1, at_step=10 + knobs.MAX_STEPS_AHEAD)  # at the horizon: waits
    assert _frames(board) == []


def test_waiting_changes_are_bounded_per_client_and_in_all() -> None:
    board = _board()
    for value in range(knobs.MAX_WAITING_PER_CLIENT + 1):
        _set(board, value, client=1, at_step=1000)
    (refusal,) = _frames(board)
    assert refusal["error"].startswith(wire.TOO_MANY_WAITING)
    assert "from this monitor" in refusal["error"]
    client = 2
    while sum(board._waiting_by_client.values()) < knobs.MAX_WAITING:
        for value in range(knobs.MAX_WAITING_PER_CLIENT):
            _set(board, value, client=client, at_step=1000)
        client += 1
    _frames(board)
    _set(board, 5, client=client, at_step=1000)
    (refusal,) = _frames(board)
    assert "from all monitors" in refusal["error"]


def test_clients_at_their_limit_leave_room_for_every_other_monitor() -> None:
    """Issue 46: four clients of 64 changes each filled "256 from all monitors" and locked
    every other monitor out for up to MAX_STEPS_AHEAD steps. Each connection's share is the
    whole over the listener's clients, so the most clients connected at once never fill it."""
    board = _board()
    for client in range(1, MAX_CLIENTS):
        for value in range(knobs.MAX_WAITING_PER_CLIENT + 1):  # each one over its share
            _set(board, value, client=client, at_step=1000)
    refusals = _frames(board)
    assert len(refusals) == MAX_CLIENTS - 1
    assert all("from this monitor" in refusal["error"] for refusal in refusals)
    for value in range(knobs.MAX_WAITING_PER_CLIENT):  # the last one still has all of its own
        _set(board, value, client=MAX_CLIENTS, at_step=1000)
    assert _frames(board) == []


@pytest.mark.parametrize("at_step", [True, 1.5, "5", [1], {}])
def test_a_change_whose_step_is_not_a_number_is_refused_with_the_reason(at_step: Any) -> None:
    """Issue 46: such a frame was dropped with no outcome, and its monitor waited for ever."""
    agent = Agent(torch)
    agent.board.declare(Knob("n", 1, lambda value: None, minimum=0, maximum=9))
    agent.board.take_outbox()
    frame = {"type": wire.SET_KNOB, "id": 7, "name": "n", "value": 2, "at_step": at_step}
    with pytest.raises(ValueError):  # the listener counts it too
        agent.on_frame(frame, 1)
    (refusal,) = _frames(agent.board)
    assert refusal["type"] == wire.KNOB_APPLIED and refusal["ok"] is False
    assert refusal["id"] == 7 and refusal["name"] == "n" and refusal["value"] == 1
    assert refusal["error"] == (
        f"{knobs.MALFORMED}: at_step must be int or null, not {wire.shown(at_step)}"
    )
    agent.board.apply_pending(step=1)
    assert agent.board.knobs["n"].value == 1


def test_a_negative_step_is_refused_at_once_saying_what_a_step_is() -> None:
    board = _board()
    _set(board, 2, client=1, at_step=-5)
    (refusal,) = _frames(board)
    assert refusal["ok"] is False and refusal["step"] is None
    assert refusal["error"].startswith(f"{knobs.NOT_A_STEP} -5")
    _set(board, 3, client=1, at_step=1)  # after the first step
    board.apply_pending(step=1)
    assert board.knobs["n"].value == 3


def test_a_leaving_clients_later_changes_are_dropped_with_an_outcome_each() -> None:
    applied: list[Any] = []
    board = _board(applied)
    _set(board, 7, client=1, at_step=50)
    _set(board, 8, client=2, at_step=50)
    _set(board, 9, client=1)  # for the next boundary: a one-shot client's change applies
    board.client_left(1)
    dropped = _frames(board)
    assert [f["id"] for f in dropped] == [7]
    assert dropped[0]["error"] == f"{wire.MONITOR_LEFT} before step 50: dropped"
    board.apply_pending(step=1)
    board.apply_pending(step=50)
    assert applied == [9, 8]
    assert board._waiting_by_client == {}


def test_a_boundary_reads_only_the_head_of_what_waits_for_later_steps() -> None:
    """O(1) a step: the reads of the waiting heap at a boundary with nothing due are the same
    for 10 waiting changes as for 250 (issue 39: a walk of 100,000 halved the step rate)."""

    def reads_at_a_boundary(waiting: int) -> int:
        board = _board()
        for value in range(waiting):
            _set(board, value, client=value, at_step=10**4 + value)
        board._later = _CountingList(board._later)
        board.apply_pending(step=5)
        return board._later.reads

    assert reads_at_a_boundary(10) == reads_at_a_boundary(250) <= 1


def test_more_outcomes_than_the_outbox_holds_are_counted_and_said() -> None:
    board = _board()
    extra = 44
    for value in range(knobs.MAX_OUTBOX + extra):
        board.request(
            wire.SetKnob.decode({"type": wire.SET_KNOB, "id": value, "name": "nope", "value": 1}), 1
        )
    frames = _frames(board)
    assert frames[0]["type"] == wire.NOTICE
    assert frames[0]["text"].startswith(f"{extra} knob outcome(s) dropped")
    assert len(frames) == knobs.MAX_OUTBOX + 1
    assert _frames(board) == []  # said once


def test_a_trial_whose_monitor_left_is_undone_at_the_next_boundary_and_said() -> None:
    applied: list[Any] = []
    board = _board(applied)
    _set(board, 5, client=1, trial=True)
    board.apply_pending(step=3)
    board.client_left(1)
    _frames(board)
    assert board.apply_pending(step=4) is False
    assert board.knobs["n"].value == 1 and applied == [5, 1]
    undone = board.history[-1]
    assert undone.reverted and undone.step == 4 and undone.value == 1
    assert str(undone.error).startswith(f"{wire.MONITOR_LEFT} during its trial")
    assert list(board.trial_reverts) == [f"knob n: {undone.error} at step 4"]


def test_kept_changes_and_kept_trials_stay_when_their_monitor_leaves() -> None:
    board = _board()
    _set(board, 5, client=1)  # a change a person asked for
    board.apply_pending(step=1)
    board.client_left(1)
    board.apply_pending(step=2)
    assert board.knobs["n"].value == 5
    _set(board, 6, client=2, trial=True)
    board.apply_pending(step=3)
    board.keep_trials(2, ["n"])  # the autopilot kept it
    board.client_left(2)
    board.apply_pending(step=4)
    assert board.knobs["n"].value == 6


def test_a_trial_reverted_by_its_monitor_or_changed_by_another_is_not_undone_again() -> None:
    applied: list[Any] = []
    board = _board(applied)
    _set(board, 5, client=1, trial=True)
    board.apply_pending(step=1)
    _set(board, 1, client=1, trial=True)  # --try measured it and put the value back
    board.apply_pending(step=2)
    _set(board, 7, client=1, trial=True)
    board.apply_pending(step=3)
    _set(board, 9, client=2)  # someone else set it since: it is not the trial's any more
    board.apply_pending(step=4)
    board.client_left(1)
    board.apply_pending(step=5)
    assert applied == [5, 1, 7, 9] and board.knobs["n"].value == 9


def test_a_trial_still_waiting_when_its_monitor_leaves_never_applies() -> None:
    applied: list[Any] = []
    board = _board(applied)
    _set(board, 5, client=1, trial=True)
    board.client_left(1)
    (dropped,) = _frames(board)
    assert dropped["error"] == f"{wire.MONITOR_LEFT} before its step: dropped"
    board.apply_pending(step=1)
    assert applied == []


class _CountingList(list[Any]):
    """A list that counts the reads of its items."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        self.reads += 1
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        self.reads += len(self)
        return super().__iter__()


def test_a_trial_applied_as_its_monitor_leaves_is_undone_at_the_boundary_after() -> None:
    """The race: the boundary took the trial off the queue just before the client left."""
    applied: list[Any] = []
    board = _board(applied)
    _set(board, 5, client=1, trial=True)
    due = list(board._queue)
    board._queue.clear()
    board.client_left(1)  # nothing of its own waits now, no trial in force yet
    board._queue.extend(due)  # ... and the boundary applies what it had taken
    board.apply_pending(step=1)
    board.apply_pending(step=2)
    assert applied == [5, 1] and board.knobs["n"].value == 1
