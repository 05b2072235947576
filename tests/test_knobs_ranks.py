"""Under torchrun every rank takes a knob change after the same step, or none does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook.knobs import Knob, KnobBoard
from gputop_train.record import reader
from tests.support.cli import headless_until
from tests.support.paths import SCENARIOS
from tests.support.torchrun import standalone_torchrun


def test_a_change_for_a_later_step_waits_for_it_and_one_that_arrives_late_is_refused() -> None:
    board = KnobBoard()
    board.declare(Knob("n", 1, lambda v: None, minimum=0, maximum=9))
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 1, "name": "n", "value": 2, "at_step": 5})
    )
    applied = [step for step in range(1, 8) if board.apply_pending(step)]
    assert applied == [5]
    board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": 2, "name": "n", "value": 3, "at_step": 6})
    )
    assert not board.apply_pending(8)
    late = board.history[-1]
    assert (late.ok, late.value, late.error) == (
        False, 2, "arrived after step 6, the step every rank applies it at",
    )  # fmt: skip


def _cudnn_changes(record: Path) -> dict[bool, dict[int, int]]:
    """The cudnn_benchmark changes the ranks took: value -> {pid: step}, as recorded so far
    (the product's reader: a line still being written is skipped)."""
    try:
        events = reader.read(record).events
    except (FileNotFoundError, reader.UnreadableRecording):  # not begun yet
        return {}
    changes: dict[bool, dict[int, int]] = {}
    for event in events:
        frame = event.get("frame") or {}
        outcome = event.get("kind") == "knob_outcome"
        if outcome and frame.get("ok") and frame["name"] == "cudnn_benchmark":
            changes.setdefault(frame["value"], {})[event["pid"]] = frame["step"]
    return changes


@pytest.mark.torch
@pytest.mark.timeout(240)  # torchrun's start, a baseline, a trial and a revert
def test_a_two_rank_gloo_job_gets_a_change_on_both_ranks_after_one_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    record = tmp_path / "ddp.jsonl"
    # The job trains until both ranks have taken the revert, then is Ctrl+C'd: a fixed 1200
    # steps ended before the trial, and a stop at the autopilot's "done" before the ranks had
    # taken its revert, beside six CPU hogs on the dev box (2026-11-27).
    run = headless_until(
        "--interval", "1", "--record", str(record), "--try", "cudnn_benchmark=true", "--",
        *standalone_torchrun(2), str(SCENARIOS), "ddp", "batch=8", "steps=100000", "step_ms=15",
        stop_when=lambda _: len(_cudnn_changes(record).get(False, {})) == 2,
    )  # fmt: skip
    trials = run.summary["autopilot"]["trials"]
    assert [(t["change"], t["decision"]) for t in trials] == [
        ("cudnn_benchmark=true", "measured")
    ], run.stderr[-2000:]
    changes = _cudnn_changes(record)
    assert set(changes) == {True, False}  # tried, then put back
    for value, steps_by_rank in changes.items():
        assert len(steps_by_rank) == 2, (value, steps_by_rank)  # both ranks
        assert len(set(steps_by_rank.values())) == 1, (value, steps_by_rank)  # one step


@pytest.mark.torch
@pytest.mark.timeout(240)  # a baseline, a trial and a revert, each measured: ~35 s alone
def test_try_turns_a_builtin_knob_of_a_script_that_declares_none() -> None:
    pytest.importorskip("torch")
    run = headless_until(
        "--interval", "1", "--no-record", "--try", "nosuchknob=4", "--try", "num_workers=1",
        "--", sys.executable, str(SCENARIOS), "sleepy", "batch_ms=15", "step_ms=5",
        "steps=100000",
        stop_when=lambda line: bool((line.get("autopilot") or {}).get("done")),
    )  # fmt: skip
    assert run.returncode == 130, run.stderr  # Ctrl+C'd once the trials were done
    trials = run.summary["autopilot"]["trials"]
    assert [(t["change"], t["decision"]) for t in trials] == [
        ("nosuchknob=4", "refused"), ("num_workers=1", "measured"),
    ]  # fmt: skip
    assert trials[1]["phase"] is not None and trials[1]["gain"] is not None
    knobs = {k["name"]: k for k in run.summary["knobs"]}
    assert knobs["num_workers"]["builtin"] and knobs["num_workers"]["value"] == 0  # put back
    assert knobs["channels_last"]["unavailable"] == "the model has no 2-D convolution"
