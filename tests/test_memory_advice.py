"""GPU memory near its limit, with the hook's memory audit: the peak split into the model's
own tensors and the rest, and each fix with what it would free (issue 26)."""

from __future__ import annotations

from dataclasses import replace

from gputop_train import wire
from gputop_train.advise import rules
from tests.support.observations import FP32_H100, GiB, observe

# An fp32 GPT at 76 of the H100's 80 GiB: 2 GiB of parameters, 2 of gradients, 4 of AdamW
# state; the other 66 GiB of the 74 GiB peak are activations and temporaries.
AUDIT = wire.MemoryAudit(
    params_bytes=2 * GiB, grads_bytes=2 * GiB, optimizer_bytes=4 * GiB, allocated_peak=74 * GiB,
    reserved_peak=76 * GiB, alloc_retries=3, ooms=0, device_total=80 * GiB,
)  # fmt: skip


def _memory_finding(**changes: object) -> rules.Finding:
    o = observe(gpu_mem_used_bytes=76 * GiB, gpu_mem_total_bytes=80 * GiB, **changes)
    return next(f for f in rules.findings(o) if f.id == "gpu.memory_near_limit")


def test_the_audit_splits_the_peak_and_each_fix_says_what_it_frees() -> None:
    finding = _memory_finding(memory=AUDIT, model=FP32_H100)
    assert finding.evidence[1] == (
        "allocated peak 74.0 GiB: parameters 2.0 GiB, gradients 2.0 GiB, optimizer state "
        "4.0 GiB, activations and temporaries 66.0 GiB (hook audit)"
    )
    assert finding.evidence[2].startswith("3 allocation retries, 0 OOMs so far")
    assert finding.action == (
        "before it OOMs: activation checkpointing (frees up to 66.0 GiB); half the micro-batch "
        "with twice the gradient accumulation, the same effective batch (about 33.0 GiB); bf16 "
        "parameters and gradients (2.0 GiB); optimizer state in bf16 (2.0 GiB)"
    )
    assert finding.gain == 1.0  # a risk, never a promised speed-up


def test_bf16_parameters_are_not_offered_where_they_are_not_fp32() -> None:
    finding = _memory_finding(memory=AUDIT, model=replace(FP32_H100, param_dtype="bfloat16"))
    assert "bf16 parameters" not in finding.action and "checkpointing" in finding.action


def test_without_an_audit_the_advice_stays_general() -> None:
    finding = _memory_finding()
    assert finding.evidence == ("GPU memory 76.0/80.0 GiB (NVML)",)
    assert finding.action.startswith("activation checkpointing, mixed precision")
