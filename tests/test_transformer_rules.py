"""The transformer rules on synthetic observations that must, and must not, trigger them."""

from __future__ import annotations

from dataclasses import replace

from gputop_train.advise import rules
from gputop_train.session.workload import Workload
from tests.support.observations import BF16_H100, headline, ids, observe

EAGER = replace(BF16_H100, compiled=False)
# An eager GPT whose kernels spend 45% of their time outside GEMMs and attention.
EAGER_GPT = Workload(
    ops=2100, fused_attention=12, tokens=32768, kernels=1900, kernel_ms=95.0, non_math_pct=45.0
)


def test_an_eager_transformer_with_time_outside_matrix_math_is_told_to_compile() -> None:
    o = observe(model=EAGER, workload=EAGER_GPT)
    finding = headline(o)  # above "GPU-bound (healthy)"
    assert finding.id == "gpu.compile" and finding.changes == (rules.Change("compile", True),)
    assert finding.gain > 1.1 and "45%" in " ".join(finding.evidence)


def test_a_healthy_or_compiled_transformer_is_not_told_to_compile() -> None:
    lean = observe(model=EAGER, workload=replace(EAGER_GPT, non_math_pct=12.0))
    assert "gpu.compile" not in ids(lean) and headline(lean).id == "gpu.bound"
    compiled = observe(model=BF16_H100, workload=EAGER_GPT)
    assert "gpu.compile" not in ids(compiled)
    unprofiled = observe(model=EAGER, workload=replace(EAGER_GPT, non_math_pct=None))
    assert "gpu.compile" not in ids(unprofiled)  # not measured: not guessed
    input_bound = observe(model=EAGER, workload=EAGER_GPT, step_data_wait_pct=60.0)
    assert "gpu.compile" not in ids(input_bound)


def test_hand_written_attention_is_told_to_use_sdpa_first() -> None:
    manual = replace(EAGER_GPT, fused_attention=0, manual_attention=12, non_math_pct=70.0)
    found = rules.findings(observe(model=EAGER, workload=manual))
    assert found[0].id == "model.sdpa" and found[0].changes == (rules.Change("attention", "sdpa"),)
    assert "gpu.compile" in [f.id for f in found]  # fusion pays too, less
    sdpa = observe(model=EAGER, workload=EAGER_GPT)
    assert "model.sdpa" not in ids(sdpa)


def test_a_for_loop_optimizer_is_named_with_its_operator_count() -> None:
    facts = replace(BF16_H100, optimizer="AdamW", optimizer_foreach=False)
    o = observe(model=facts, workload=replace(EAGER_GPT, optimizer_ops=1480))
    finding = next(f for f in rules.findings(o) if f.id == "optimizer.for_loop")
    assert "1480 of the step's 2100 operators" in " ".join(finding.evidence)
    assert finding.changes == (rules.Change("optimizer", "fused"),)
    default = observe(model=replace(facts, optimizer_foreach=None))  # foreach on CUDA
    assert "optimizer.for_loop" not in ids(default)


def test_one_sync_per_step_matters_only_while_the_gpu_idles() -> None:
    site = {"file": "/x/trainer.py", "line": 12, "op": "if torch.isnan(loss):", "count": 1}
    # gpt_trainer_sync on the H100: SM 41%, NVML 51-62% (a kernel runs 62% of the time).
    idle = observe(syncs_per_step=1, sync_sites=(site,), gpu_sm_active_pct=40.0, gpu_util_pct=60.0)
    finding = next(f for f in rules.findings(idle) if f.id == "syncs.per_step")
    assert "trainer.py:12" in " ".join(finding.evidence) and finding.gain == 1.5
    # A kernel running 95% of the time leaves the GPU 5% to fill, whatever SM activity says.
    full = observe(syncs_per_step=1, sync_sites=(site,), gpu_sm_active_pct=40.0)
    assert next(f for f in rules.findings(full) if f.id == "syncs.per_step").gain < 1.06
    busy = observe(syncs_per_step=1, sync_sites=(site,), gpu_sm_active_pct=92.0)
    assert "syncs.per_step" not in ids(busy)


def test_memory_near_its_limit_qualifies_healthy_but_not_a_finding_with_a_gain() -> None:
    full = dict(gpu_mem_used_bytes=76 * 2**30)  # of 80 GiB
    healthy = observe(**full)
    assert [f.id for f in rules.findings(healthy)][:2] == ["gpu.memory_near_limit", "gpu.bound"]
    eager = observe(**full, model=EAGER, workload=EAGER_GPT)
    assert headline(eager).id == "gpu.compile"
