"""Model FLOPs utilization: achieved FLOP/s against the GPU's dense peak for the precision."""

from __future__ import annotations

# Dense (no sparsity) peak TFLOP/s from NVIDIA's data sheets, per precision. PyTorch runs
# fp32 convolutions through cuDNN on TF32 tensor cores by default (allow_tf32), so "fp32"
# is held to the TF32 peak where the GPU has one (Ampere and newer); V100 has none.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "fp32": 378.0},
    "H100": {"bf16": 989.5, "fp16": 989.5, "fp32": 494.5},  # SXM5 (80GB HBM3)
    "H200": {"bf16": 989.5, "fp16": 989.5, "fp32": 494.5},
    "A100": {"bf16": 312.0, "fp16": 312.0, "fp32": 156.0},
    "L40S": {"bf16": 362.0, "fp16": 362.0, "fp32": 183.0},
    "L4": {"bf16": 121.0, "fp16": 121.0, "fp32": 60.0},
    "V100": {"fp16": 125.0, "fp32": 15.7},
}


def peak_tflops(gpu_name: str | None, precision: str | None) -> float | None:
    """The dense peak for this GPU and precision (bf16 when the precision is unknown)."""
    if not gpu_name:
        return None
    for model, peaks in PEAK_TFLOPS.items():  # most specific names come first
        if model in gpu_name:
            return peaks.get(precision or "bf16")
    return None


def achieved_tflops(flops_per_sample: float | None, samples_per_s: float | None) -> float | None:
    if flops_per_sample is None or samples_per_s is None:
        return None
    return flops_per_sample * samples_per_s / 1e12


def mfu_pct(achieved: float | None, peak: float | None) -> float | None:
    if achieved is None or not peak:
        return None
    return 100.0 * achieved / peak


def efficiency(observation: object) -> tuple[float | None, float | None]:
    """(achieved TFLOP/s, MFU %) of an observation; None where not measurable."""
    flops = getattr(observation, "flops_per_sample", None)
    steps = getattr(observation, "steps", None)
    achieved = achieved_tflops(flops, steps.samples_per_s if steps else None)
    peak = peak_tflops(
        getattr(observation, "gpu_name", None), getattr(observation, "precision", None)
    )
    return achieved, mfu_pct(achieved, peak)
