"""Model rules: how the model's arithmetic reaches the tensor cores (precision, layout) and
what a transformer leaves to fusion, SDPA and a fused optimizer."""

from __future__ import annotations

from ... import format as fmt
from ...session import stats
from ...session.stats import Observation
from .finding import Change, Finding
from .window import (
    GPU_BUSY_UTIL_PCT,
    GPU_UNDERUSED_PCT,
    INPUT_DOMINANT_PCT,
    site_evidence,
    wait_pct,
)

# A GPU busy enough for its arithmetic to matter: GPM SM activity at the under-used line or
# above (NVML utilization at the busy line without GPM). The ImageNet-style script with 16
# workers in fp32 on the H100 ran at SM 63%. Not the hook's GPU time: CUDA events span the
# GPU's timeline, idle gaps included; it read 100% on every corpus scenario on the H200, the
# launch-bound one at SM 3% among them (docs/diagnosis.md).
# Compute capability with bf16 tensor cores (Ampere and newer); fp16 ones from Volta.
BF16_CAPABILITY = (8, 0)
FP16_CAPABILITY = (7, 0)
# Convolutions on tensor cores (bf16/fp16, or fp32 as cuDNN's default TF32) want NHWC: in NCHW
# cuDNN transposes around each. PyTorch's memory-format tutorial measured +22% on ResNet-50
# with AMP (V100); ResNet-50 in fp32 (TF32) on the H200 gained 39% from channels_last alone,
# while bf16 alone, still NCHW, gained 10% (docs/diagnosis.md).
CHANNELS_LAST_GAIN = 1.3
MIXED_PRECISION_NCHW_GAIN = 1.1
# An eager model whose kernels spend this share of their time outside GEMMs and attention
# (element-wise, norms, softmax, copies, the optimizer) has fusion to gain. Eager GPT-2 small
# in bf16 with SDPA on the H100 profiled 53-58% (micro-batch 8 to 63, 2026-11-24); the fp32
# loop, whose matmuls dominate, 11%.
EAGER_NON_MATH_PCT = 30.0
# The part of that time torch.compile's fusion takes back: half, so that 56% outside matrix
# math reads "up to 1.4x", about what nanoGPT's compile gave in issue 26 (1.27x on the H100);
# the corpus's nanogpt_eager checks it (docs/diagnosis.md).
FUSION_RECOVERS = 0.5
# The part of it SDPA takes back from hand-written attention (the softmax, mask and dropout
# over the T x T scores, and the scores' reads and writes): hand-written attention profiled
# 78-79% outside matrix math on the H100, and SDPA paid 2.27x in issue 26.
SDPA_RECOVERS = 0.8
SDPA_MIN_GAIN = 1.3
# An optimizer built with foreach=False: the share of the step's operators it launches, times
# this, is what fused=True takes back. The GPT ladder on the H100 (bf16, SDPA, micro-batch 8)
# went 1.43x faster with fused AdamW where the loop was 69% of the step's operators.
FOR_LOOP_RECOVERS = 0.45


def _gpu_busy_for_math(o: Observation) -> tuple[bool, str]:
    """Whether the GPU's arithmetic is what the step spends its time on, and the figure."""
    sm = o.gpu.sm_active_pct
    if sm is not None:
        return sm >= GPU_UNDERUSED_PCT, f"SM activity {fmt.pct(sm)} (GPM)"
    util = o.gpu.util_pct
    return util is not None and util >= GPU_BUSY_UTIL_PCT, f"GPU utilization {fmt.pct(util)} (NVML)"


def mixed_precision(o: Observation) -> Finding | None:
    """An fp32 step on a GPU with bf16/fp16 tensor cores, whose arithmetic is the work.

    TF32 is not mixed precision: cuDNN runs fp32 convolutions as TF32, which lifted GPM
    tensor activity to 8% on the ImageNet-style script in fp32 (H100), above any "tensor
    cores idle" line, with a 2x left on the table. The hook's facts decide, not the activity.
    """
    facts, capability = o.model, stats.capability(o.model)
    if not o.uses_gpu or facts.autocast != "off" or facts.param_dtype != "float32":
        return None
    if capability is None or capability < FP16_CAPABILITY:
        return None
    if wait_pct(o) >= INPUT_DOMINANT_PCT:
        return None  # a GPU that waits for data is not held back by its arithmetic
    busy, busy_text = _gpu_busy_for_math(o)
    if not busy:
        return None
    bf16 = capability >= BF16_CAPABILITY
    dtype = "bfloat16" if bf16 else "float16"
    evidence = [
        busy_text,
        "no autocast in the forward pass, parameters float32; " + _tf32_evidence(o),
        f"compute capability {capability[0]}.{capability[1]}: "
        f"{'bf16 and fp16' if bf16 else 'fp16'} tensor cores (hook)",
        f"tensor activity {fmt.pct(o.gpu.tensor_active_pct)} (GPM)",
    ]
    # A convnet in NCHW whose fp32 convolutions already run on the tensor cores (TF32) keeps
    # the transposes whatever the precision: channels_last first (gpu.channels_last outranks
    # this), then the full gain. Without TF32 (V100) AMP is what brings the tensor cores.
    nchw = facts.channels_last is False and _tensor_core_convolutions(o) == "TF32"
    gain = MIXED_PRECISION_NCHW_GAIN if nchw else 2.0
    if nchw:
        evidence.append("convolution weights in NCHW: most of the gain waits for channels_last")
    changes: tuple[Change, ...] = (Change("precision", "bf16" if bf16 else "fp16"),)
    action = (
        f"mixed precision: torch.autocast(device_type='cuda', dtype=torch.{dtype}) around the "
        "forward and the loss" + ("" if bf16 else " (fp16 needs a GradScaler)")
    )
    if facts.tf32_matmul is False and not o.workload.convolutions and bf16:
        # Matmuls in full fp32 run on the CUDA cores: TF32 is one line, short of bf16.
        changes += (Change("matmul_precision", "high"),)
        action += "; at least torch.set_float32_matmul_precision('high') (TF32 matmuls)"
    return Finding(
        "gpu.mixed_precision",
        "The step's arithmetic runs in fp32 on a GPU with "
        f"{'bf16' if bf16 else 'fp16'} tensor cores",
        tuple(evidence),
        action,
        f"up to {gain:g}x",
        0.8,
        gain,
        changes=changes,
    )


def _tf32_evidence(o: Observation) -> str:
    """Matmul and convolution TF32, each from its own switch: cuDNN's allow_tf32 (on by
    default) says nothing about the matmuls, which run in full fp32 unless
    float32_matmul_precision is "high" or "medium"."""
    facts = o.model
    setting = facts.matmul_precision or ("high" if facts.tf32_matmul else "highest")
    matmuls = "TF32" if facts.tf32_matmul else "full fp32, no tensor cores"
    text = f"matmuls {matmuls} (float32_matmul_precision {setting!r})"
    if o.workload.convolutions or facts.channels_last is not None:
        text += f"; convolutions TF32 {'on' if facts.tf32_cudnn else 'off'} (cuDNN allow_tf32)"
    return text + " (hook)"


def _tensor_core_convolutions(o: Observation) -> str | None:
    """How convolutions reach the tensor cores: "bf16"/"fp16" autocast or "TF32"; None."""
    if o.precision in ("bf16", "fp16"):
        return o.precision
    facts = o.model
    capability = stats.capability(facts)
    tf32 = capability is not None and capability >= BF16_CAPABILITY
    return "TF32" if o.precision == "fp32" and facts.tf32_cudnn and tf32 else None


def channels_last(o: Observation) -> Finding | None:
    """Convolutions on tensor cores in the NCHW layout: cuDNN transposes around each."""
    via = _tensor_core_convolutions(o)
    if not o.uses_gpu or o.model.channels_last is not False or via is None:
        return None
    if wait_pct(o) >= INPUT_DOMINANT_PCT:
        return None
    busy, busy_text = _gpu_busy_for_math(o)
    if not busy:
        return None
    return Finding(
        "gpu.channels_last",
        f"Convolutions run on the tensor cores ({via}) in NCHW: transposed at every layer",
        (busy_text, f"{via} convolutions, weights not channels_last (hook)"),
        "model.to(memory_format=torch.channels_last) and the same for the input batches",
        f"up to {CHANNELS_LAST_GAIN:.1f}x",
        0.8,
        CHANNELS_LAST_GAIN,
        changes=(Change("channels_last", True),),
    )


def _transformer_math_busy(o: Observation) -> tuple[bool, str]:
    """A GPU job whose arithmetic is the work, not waiting on input."""
    if not o.uses_gpu or wait_pct(o) >= INPUT_DOMINANT_PCT:
        return False, ""
    return _gpu_busy_for_math(o)


def _kernel_evidence(o: Observation) -> str:
    w = o.workload
    top = f": {', '.join(w.top_non_math)}" if w.top_non_math else ""
    return (
        f"{w.kernels} kernels in one step, {fmt.pct(w.non_math_pct)} of their "
        f"{w.kernel_ms or 0:.1f} ms outside GEMMs and attention (torch.profiler, hook){top}"
    )


def _tensor_evidence(o: Observation) -> str:
    precision = o.workload.matmul_precision or o.precision or "N/A"
    return f"tensor activity {fmt.pct(o.gpu.tensor_active_pct)} (GPM) with {precision} matmuls"


def compile_transformer(o: Observation) -> Finding | None:
    """An eager transformer whose kernel time is largely outside matrix math: fusion pays."""
    w = o.workload
    if o.model.compiled is not False or not w.transformer or w.non_math_pct is None:
        return None
    busy, busy_text = _transformer_math_busy(o)
    if not busy or w.non_math_pct < EAGER_NON_MATH_PCT:
        return None
    gain = 1.0 / (1.0 - FUSION_RECOVERS * w.non_math_pct / 100.0)
    return Finding(
        "gpu.compile",
        f"Eager transformer: {fmt.pct(w.non_math_pct)} of the GPU's kernel time is outside "
        "matrix math",
        (
            busy_text,
            _kernel_evidence(o),
            f"{w.ops} operators per step, not compiled (hook census)",
            _tensor_evidence(o),
        ),
        "torch.compile(model): fuses the element-wise kernels (norms, activations, residuals)",
        f"up to {gain:.1f}x",
        0.8,
        gain,
        changes=(Change("compile", True),),
    )


def attention_sdpa(o: Observation) -> Finding | None:
    """Attention written by hand (softmax over q @ k^T): the T x T scores go through memory
    several times; scaled_dot_product_attention computes them on chip (flash attention)."""
    w = o.workload
    if not w.manual_attention or w.fused_attention:
        return None
    busy, busy_text = _transformer_math_busy(o)
    if not busy:
        return None
    share = (w.non_math_pct or 0.0) / 100.0
    gain = max(SDPA_MIN_GAIN, 1.0 / (1.0 - SDPA_RECOVERS * share))
    evidence = [
        busy_text,
        f"{w.manual_attention} softmax calls over (B, H, T, T) scores per step, no "
        "scaled_dot_product_attention call (hook census)",
        *site_evidence(w.attention_at, "the first softmax over (B, H, T, T) scores"),
    ]
    if w.non_math_pct is not None:
        evidence.append(_kernel_evidence(o))
    return Finding(
        "model.sdpa",
        "Hand-written attention: softmax(q @ k^T) @ v materializes the T x T scores",
        tuple(evidence),
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) in place "
        "of the matmul, mask, softmax and dropout",
        f"up to {gain:.1f}x",
        0.85,
        gain,
        changes=(Change("attention", "sdpa"),),
    )


def optimizer_for_loop(o: Observation) -> Finding | None:
    """An optimizer told foreach=False launches its element-wise ops once per parameter."""
    facts, w = o.model, o.workload
    if not o.uses_gpu or facts.optimizer_foreach is not False or facts.optimizer_fused:
        return None
    evidence = [f"{facts.optimizer or 'the optimizer'}(foreach=False): a loop over parameters"]
    gain = 1.1  # not counted: the least a loop of launches costs
    if w.optimizer_ops is not None and w.ops:
        evidence.append(
            f"{w.optimizer_ops} of the step's {w.ops} operators run in optimizer.step() "
            "(hook census)"
        )
        gain = max(gain, 1.0 / (1.0 - FOR_LOOP_RECOVERS * w.optimizer_ops / w.ops))
    return Finding(
        "optimizer.for_loop",
        "The optimizer updates one parameter at a time",
        tuple(evidence),
        f"{facts.optimizer or 'the optimizer'}(..., fused=True) (or foreach=True): a few "
        "kernels for all parameters",
        f"up to {gain:.1f}x",
        0.7,
        gain,
        changes=(Change("optimizer", "fused"),),
    )
