"""Samples and tokens per step from what the model's forward receives (no DataLoader), and
the N/A, with its reason, of every loop where that would be wrong (docs/steps.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook.forward_probe import count_inputs
from gputop_train.session import stats
from tests.support.hooked import HookedRun, run_hooked

torch = pytest.importorskip("torch")

LOOPS = Path(__file__).parent / "scenarios" / "token_loops.py"


def hooked(tmp_path: Path, name: str, *params: str) -> HookedRun:
    run = run_hooked(name, *params, tmp_path=tmp_path, script=LOOPS)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "disabled" not in run.stderr, run.stderr
    return run


def truth(run: HookedRun) -> list[dict]:
    return json.loads(run.stdout.split("TRUTH ", 1)[1])


def reason(run: HookedRun) -> str | None:
    facts = run.session.facts(wire.StepParts)
    return facts[-1].reason if facts else None


def test_a_nanogpt_loop_counts_batch_x_block_x_accumulation(tmp_path: Path) -> None:
    # 80 steps: both meters' sums telescope to the time between two boundaries, so one
    # boundary read 3 ms late moves the rate by 3 ms over the whole span (20 steps of a few
    # ms read 4.4% off beside a CPU hog, 2026-11-25).
    run = hooked(tmp_path, "nanogpt", "batch=4", "block=16", "accum=3", "steps=80")
    own = truth(run)
    steps = run.steps[1:]  # the model is found at the first step's end
    assert [s.samples for s in steps] == [t["samples"] for t in own[1:]] == [12] * 79
    assert [s.tokens for s in steps] == [t["tokens"] for t in own[1:]] == [192] * 79
    assert run.steps[0].tokens is None  # before the model was found: N/A, not 0
    # The rate past the hook's start-up steps (the model's search, the FLOP count, the
    # first sync scan and the built-in knobs land in steps 2-6, not in the loop's meter).
    steady, own_steady = run.steps[8:], own[8:]
    figures = stats.step_stats(steady, None)
    own_tokens_per_s = sum(t["tokens"] for t in own_steady) / sum(t["step_ms"] for t in own_steady)
    assert figures.tokens_per_s == pytest.approx(own_tokens_per_s * 1000.0, rel=0.03)
    assert figures.samples_per_s == pytest.approx(figures.tokens_per_s / 16, rel=1e-9)


def test_an_attention_mask_counts_only_the_non_padding_tokens(tmp_path: Path) -> None:
    run = hooked(tmp_path, "masked", "accum=2", "steps=8")
    own = truth(run)
    assert [s.tokens for s in run.steps[1:]] == [t["tokens"] for t in own[1:]]
    assert all(s.tokens < 2 * 6 * 12 for s in run.steps[1:])  # padding left out
    assert [s.samples for s in run.steps[1:]] == [12] * 7


def test_count_samples_and_count_tokens_override_the_forward(tmp_path: Path) -> None:
    run = hooked(tmp_path, "counted", "steps=5")
    assert [(s.samples, s.tokens) for s in run.steps] == [(3, 40)] * 5


def test_a_compiled_model_is_counted_through_its_wrapper(tmp_path: Path) -> None:
    run = hooked(tmp_path, "compiled", "steps=5")
    assert [(s.samples, s.tokens) for s in run.steps[1:]] == [(4, 64)] * 4
    assert run.session.facts(wire.StepParts)[-1].model == "OptimizedModule(TinyGPT)"


def test_a_model_compiled_in_place_is_counted(tmp_path: Path) -> None:
    # model.compile() compiles the module's call; the class's __call__ around it stays eager.
    run = hooked(tmp_path, "compiled_in_place", "steps=5")
    assert [(s.samples, s.tokens) for s in run.steps[1:]] == [(4, 64)] * 4
    assert run.steps[-1].part_fwd_ms is not None and run.steps[-1].part_bwd_ms is not None


def test_ddp_is_counted_through_its_wrapper(tmp_path: Path) -> None:
    run = hooked(tmp_path, "ddp", "accum=2", "steps=5")
    assert [(s.samples, s.tokens) for s in run.steps[1:]] == [(8, 128)] * 4
    assert run.session.facts(wire.StepParts)[-1].model == "DistributedDataParallel(TinyGPT)"


def test_evaluation_forwards_are_not_training_samples(tmp_path: Path) -> None:
    run = hooked(tmp_path, "with_eval", "steps=12")
    assert [(s.samples, s.tokens) for s in run.steps[1:]] == [(4, 64)] * 11


@pytest.mark.parametrize(
    ("loop", "why"),
    [
        ("no_tensor", "took no tensor"),
        ("two_models", "2 models (Linear) train under one optimizer"),
        ("two_optimizers", "several optimizers step"),
    ],
)
def test_bad_input_reads_na_with_its_reason(tmp_path: Path, loop: str, why: str) -> None:
    run = hooked(tmp_path, loop, "steps=6")
    assert len(run.steps) == 6
    assert all(s.samples is None and s.tokens is None for s in run.steps)
    assert why in (reason(run) or "")


def test_backward_without_an_optimizer_makes_no_step_and_no_error(tmp_path: Path) -> None:
    run = hooked(tmp_path, "backward_only", "steps=6")
    assert run.steps == [] and run.session.facts(wire.StepParts) == []


def test_what_a_forward_receives() -> None:
    ids = torch.zeros(3, 7, dtype=torch.long)
    assert count_inputs((ids,), {}) == (3, 21, None)
    mask = torch.ones(3, 7)
    assert count_inputs((), {"input_ids": ids, "attention_mask": mask})[2] is mask
    assert count_inputs((torch.zeros(5, 3, 8, 8),), {}) == (5, None, None)  # images
    assert count_inputs((torch.zeros(5, dtype=torch.long),), {}) == (5, None, None)  # 1-D
    odd_mask = torch.ones(3, 1, 7, 7)  # a 4-D mask is not a padding mask: batch x sequence
    assert count_inputs((ids,), {"attention_mask": odd_mask}) == (3, 21, None)
    with pytest.raises(ValueError, match="no tensor"):
        count_inputs((3,), {"n": "x"})


def test_a_new_folds_model_is_counted_once_its_optimizer_takes_over(tmp_path: Path) -> None:
    # The handover (3 steps alone) moves the counted optimizer to the fold's; its model is
    # then looked for again: the second fold's batches (5) are counted, never the first's.
    run = hooked(tmp_path, "folds", "folds=2", "steps=8")
    samples = [s.samples for s in run.steps]
    assert samples[1:8] == [4] * 7
    assert samples[-3:] == [5] * 3
    assert 4 not in samples[8:]


def test_a_copied_or_saved_model_carries_none_of_the_hooks(tmp_path: Path) -> None:
    # AveragedModel deep-copies the hooked model (deepcopy raised TypeError on the probe's
    # hooks before); the copy has no hook, so its forwards are not the model's samples.
    run = hooked(tmp_path, "ema", "steps=8")
    assert "copied hooks 0" in run.stdout
    assert [(s.samples, s.tokens) for s in run.steps[1:]] == [(4, 64)] * 7
