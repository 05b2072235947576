"""The hook's measurements against known truths, in real processes armed like a user's job."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from gputop_train import wire
from tests.support.hooked import run_hooked

pytest.importorskip("torch")


def test_data_wait_and_step_time_are_within_ten_percent_of_the_truth(tmp_path: Path) -> None:
    # 40 ms to produce each batch, then 40 ms of "compute": 40 ms waiting, 80 ms a step.
    run = run_hooked("sleepy", "batch_ms=40", "step_ms=40", "steps=20", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert len(run.steps) == 20
    truth = json.loads(run.stdout.split("TRUTH ", 1)[1])[2:]
    steady = run.steps[2:]  # the first steps also pay for start-up
    # The truth is the loop's own clock around next() and around the whole iteration: a
    # sleep overshoots and a tiny backward costs ms on a loaded CI machine, so the planned
    # 40/80 ms are only lower bounds.
    assert all(s.data_ms >= 40.0 and s.step_ms >= 80.0 for s in steady)
    for key in ("step_ms", "data_ms"):
        measured = statistics.median(getattr(s, key) for s in steady)
        assert measured == pytest.approx(statistics.median(t[key] for t in truth), rel=0.10)


def test_samples_are_inferred_from_the_batch(tmp_path: Path) -> None:
    run = run_hooked("sleepy", "batch=5", "batch_ms=0", "step_ms=1", "steps=6", tmp_path=tmp_path)
    assert [s.samples for s in run.steps] == [5] * 6
    assert [s.batches for s in run.steps] == [1] * 6


def test_gradient_accumulation_counts_every_batch_of_a_step(tmp_path: Path) -> None:
    run = run_hooked("accumulate", "batch=3", "accum=4", "steps=5", tmp_path=tmp_path)
    assert [s.step for s in run.steps] == [1, 2, 3, 4, 5]
    assert all(s.batches == 4 and s.samples == 12 for s in run.steps)


def test_a_loop_without_dataloader_is_still_seen_step_by_step(tmp_path: Path) -> None:
    run = run_hooked("no_dataloader", "steps=10", "step_ms=20", tmp_path=tmp_path)
    assert [s.step for s in run.steps] == list(range(1, 11))
    assert run.steps[0].step_ms is None  # nothing showed when the first step began
    assert all(s.data_ms is None for s in run.steps)  # no DataLoader: N/A, not 0
    assert all(s.samples == 16 for s in run.steps[1:])  # declared via count_samples()
    assert all(s.step_ms >= 20.0 for s in run.steps[1:])  # never shorter than its sleep


def test_a_cpu_job_reports_no_gpu_time_or_memory(tmp_path: Path) -> None:
    run = run_hooked("sleepy", "batch_ms=0", "step_ms=1", "steps=3", tmp_path=tmp_path)
    assert all(s.gpu_ms is None and s.mem_alloc is None for s in run.steps)


def test_a_validation_pass_between_steps_is_not_training_data(tmp_path: Path) -> None:
    # Every 10 steps, 5 validation batches of 32 (20 ms each) run between two training steps:
    # their time stays in that step's wall time, but not in its data-wait or its samples.
    run = run_hooked("with_eval", "steps=30", "every=10", "val_batches=5", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert [s.samples for s in run.steps] == [8] * 30
    assert [s.batches for s in run.steps] == [1] * 30
    after_eval = [s for s in run.steps if s.step in (11, 21)]
    assert all(s.step_ms >= 100.0 and s.data_ms < 50.0 for s in after_eval)
    loaders = run.session.facts(wire.Loader)  # the training loader's epoch only
    assert [frame.shape for frame in loaders] == [[8, 4]]


def test_the_precision_facts_come_from_the_forward_pass(tmp_path: Path) -> None:
    run = run_hooked("autocast_loop", "steps=6", tmp_path=tmp_path)
    frames = run.session.facts(wire.Model)
    assert frames and frames[0].step == 2
    assert frames[0].autocast == "bfloat16" and frames[0].param_dtype == "float32"
    assert frames[0].cuda is False and frames[0].compiled is False
    plain = run_hooked("sleepy", "batch_ms=0", "step_ms=1", "steps=3", tmp_path=tmp_path)
    assert [frame.autocast for frame in plain.session.facts(wire.Model)] == ["off"]


def test_threads_training_side_by_side_are_not_merged_into_one_step(tmp_path: Path) -> None:
    run = run_hooked("two_trainers", "steps=30", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "both trained" in run.stdout
    # While both train, the main thread's steps only, each with its own batch of 4 (the other
    # thread's batches of 8 are left out); once the main thread's optimizer is gone, the
    # thread still training is measured (its first step's batches were fetched while it was
    # left out: unknown, None). Never a step that mixes the two.
    steps = run.steps
    assert [s.step for s in steps[:30]] == list(range(1, 31))
    assert {s.samples for s in steps[1:30]} == {4}
    assert {s.samples for s in steps[30:]} <= {8, None}
    notices = " ".join(run.session.snapshot(60.0).notices)
    assert "more than one thread" in notices and "MainThread" in notices


def test_a_new_optimizer_per_fold_takes_over_the_step_count(tmp_path: Path) -> None:
    # 3 folds of 8 steps, each fold's optimizer kept alive: the newest one is counted once it
    # has stepped 3 times alone (its first 2 steps are left out), and the move is said once.
    run = run_hooked("folds", "folds=3", "steps=8", tmp_path=tmp_path)
    assert run.returncode == 0 and "folds trained 3" in run.stdout, run.stderr
    assert [s.step for s in run.steps] == list(range(1, 8 + 6 + 6 + 1))
    notices = [n for n in run.session.snapshot(60.0).notices if "moved to a new SGD" in n]
    assert len(notices) == 1


def test_a_gans_second_optimizer_never_takes_over(tmp_path: Path) -> None:
    run = run_hooked("gan", "steps=10", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert [s.step for s in run.steps] == list(range(1, 11))
    assert not any("moved to a new" in n for n in run.session.snapshot(60.0).notices)


def test_a_replaced_loaders_persistent_workers_exit_with_it(tmp_path: Path) -> None:
    # The hook once held every DataLoader it saw, and a persistent-workers loader holds its
    # iterator: four rounds of a rebuilt loader left eight worker processes alive.
    run = run_hooked("replaced_loaders", "rounds=4", "workers=2", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "live workers: 0" in run.stdout, run.stdout[-500:]


def test_the_hook_holds_no_model_or_optimizer_the_script_dropped(tmp_path: Path) -> None:
    # Past the built-in knobs' declaration and the probes: a sweep that drops a trial's model
    # must get its memory back (an Adam's state is twice the model).
    run = run_hooked("dropped", "steps=12", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "still held: [False, False]" in run.stdout
