"""The hook's ``workload`` frame, checked: what one step computes (the operator census and
its analytic FLOPs), one step's kernels, and the matmul peak measured on the device. Every
field is None where the frame lacks it or holds the wrong kind of value (N/A, never a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Workload:
    ops: int | None = None  # operators launched per step (views excluded; census)
    optimizer_ops: int | None = None  # of which inside optimizer.step()
    fused_attention: int | None = None  # SDPA-backed attention calls per step
    manual_attention: int | None = None  # softmax over (B, H, T, T) scores per step
    convolutions: int | None = None
    fp8_matmuls: int | None = None
    params: int | None = None
    non_embedding_params: int | None = None
    analytic_flops: int | None = None  # 6 N tokens + attention, per optimizer step
    analytic_note: str | None = None  # why analytic_flops is None
    tokens: int | None = None  # per optimizer step, through the token embedding
    sequence: int | None = None
    matmul_precision: str | None = None  # "bf16", "fp16", "tf32", "fp32", "fp8"
    kernels: int | None = None  # CUDA kernels of one profiled step
    kernel_ms: float | None = None
    non_math_pct: float | None = None  # share of kernel time outside GEMM/attention/conv
    top_non_math: tuple[str, ...] = ()
    profile_ms: float | None = None  # what the profiling step's stop cost the job
    peak_tflops: float | None = None  # measured matmul peak at peak_precision
    peak_precision: str | None = None
    peak_run_ms: float | None = None
    peak_note: str | None = None

    @property
    def transformer(self) -> bool:
        """Attention calls in the forward, or a token embedding: a token model."""
        return bool(self.fused_attention or self.manual_attention or self.tokens)

    @classmethod
    def from_frame(cls, frame: dict[str, Any] | None) -> Workload:
        if not frame:
            return cls()
        census = _dict(frame.get("census"))
        profile = _dict(frame.get("profile"))
        peak = _dict(frame.get("peak"))
        return cls(
            ops=_int(census.get("ops")),
            optimizer_ops=_int(census.get("optimizer_ops")),
            fused_attention=_int(census.get("fused_attention")),
            manual_attention=_int(census.get("manual_attention")),
            convolutions=_int(census.get("convolutions")),
            fp8_matmuls=_int(census.get("fp8_matmuls")),
            params=_int(census.get("params")),
            non_embedding_params=_int(census.get("non_embedding_params")),
            analytic_flops=_int(census.get("analytic_flops")),
            analytic_note=_str(census.get("analytic_note")),
            tokens=_int(census.get("tokens")),
            sequence=_int(census.get("sequence")),
            matmul_precision=_str(census.get("matmul_precision")),
            kernels=_int(profile.get("kernels")),
            kernel_ms=_float(profile.get("kernel_ms")),
            non_math_pct=_float(profile.get("non_math_pct")),
            top_non_math=tuple(n for n in profile.get("top_non_math") or () if isinstance(n, str)),
            profile_ms=_float(profile.get("probe_ms")),
            peak_tflops=_float(peak.get("tflops")),
            peak_precision=_str(peak.get("precision")),
            peak_run_ms=_float(peak.get("run_ms")),
            peak_note=_str(peak.get("reason")),
        )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
