"""Memory rule: GPU memory near its limit, with the hook's audit of the peak and what each fix
would free."""

from __future__ import annotations

from ... import format as fmt
from ...session.stats import Observation
from .finding import Finding

# Memory: over 90% used is near the edge.
MEMORY_NEAR_LIMIT = 0.90


def memory_near_limit(o: Observation) -> Finding | None:
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    if not used or not total or used / total < MEMORY_NEAR_LIMIT:
        return None
    evidence: tuple[str, ...] = (f"GPU memory {fmt.mem_pair(used, total)} (NVML)",)
    action = "activation checkpointing, mixed precision, or a smaller batch before it OOMs"
    audited = _memory_advice(o)
    if audited is not None:
        evidence, action = evidence + audited[0], audited[1]
    return Finding(
        "gpu.memory_near_limit",
        "GPU memory near its limit",
        evidence,
        action,
        None,
        # A risk, not a speed-up: it ties "GPU-bound (healthy)" and comes first (RULES order,
        # a stable sort), below any finding that expects a gain (an eager GPT at 94% of the
        # H100's memory still has its fusion to gain: docs/diagnosis.md).
        0.9,
        1.0,
    )


def _memory_advice(o: Observation) -> tuple[tuple[str, ...], str] | None:
    """The audit's split of the peak and each fix with what it would free, where the hook's
    memory audit is in (docs/steps.md); None without one. The estimates are bounds by
    construction, not measurements: checkpointing frees at most the activations (the peak
    less the model's own tensors); half the micro-batch with twice the accumulation keeps the
    effective batch and about halves them; bf16 parameters and gradients halve fp32 ones;
    optimizer state kept in bf16 halves it."""
    audit = o.memory
    if audit is None or audit.allocated_peak is None:
        return None
    model = [audit.params_bytes, audit.grads_bytes, audit.optimizer_bytes]
    known = [b for b in model if b is not None]
    rest = audit.allocated_peak - sum(known) if known else None
    split = ", ".join(
        f"{name} {fmt.size(b)}"
        for name, b in zip(
            ("parameters", "gradients", "optimizer state", "activations and temporaries"),
            (*model, rest),
            strict=True,
        )
        if b is not None
    )
    evidence = [f"allocated peak {fmt.size(audit.allocated_peak)}: {split} (hook audit)"]
    if audit.alloc_retries or audit.ooms:
        evidence.append(
            f"{audit.alloc_retries or 0} allocation retries, {audit.ooms or 0} OOMs so far "
            "(the allocator freed its cache to fit: fragmentation; hook)"
        )
    fixes = []
    if rest and rest > 0:
        fixes.append(f"activation checkpointing (frees up to {fmt.size(rest)})")
        fixes.append(
            "half the micro-batch with twice the gradient accumulation, the same effective "
            f"batch (about {fmt.size(rest / 2)})"
        )
    if o.model.param_dtype == "float32" and audit.params_bytes and audit.grads_bytes:
        halved = (audit.params_bytes + audit.grads_bytes) / 2
        fixes.append(f"bf16 parameters and gradients ({fmt.size(halved)})")
    if audit.optimizer_bytes:
        fixes.append(f"optimizer state in bf16 ({fmt.size(audit.optimizer_bytes / 2)})")
    if not fixes:
        return tuple(evidence), "a smaller batch before it OOMs"
    return tuple(evidence), "before it OOMs: " + "; ".join(fixes)
