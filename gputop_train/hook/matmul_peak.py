"""The GPU's matmul peak at the precision in force, measured once beside the datasheet's.

A 4096-cube matmul a few times on the training stream, right after a step, bracketed by two
CUDA events; the result is read by ``Event.query()`` on a later step, so the training thread
never waits for it. It delays the next step by the matmuls' time once (a few ms: ``run_ms``
in the frame).
"""

from __future__ import annotations

import time
from typing import Any

from .probes import float32_matmul_precision

SIDE = 4096  # 137 GFLOP a matmul: long enough to time, 96-192 MB of operands
# Repeats per precision, for ~2-5 ms on an H100 (bf16 ~700, TF32 ~400, fp32 ~50 TFLOP/s).
REPEATS = {"bf16": 16, "fp16": 16, "tf32": 8, "fp32": 2, "fp8": 0}


def matmul_precision(torch_module: Any, autocast: str | None, param_dtype: str | None) -> str:
    """The precision a matmul of this step runs in: the autocast dtype, else the parameters'
    (fp32 matmuls run on TF32 tensor cores only when float32_matmul_precision allows it)."""
    dtype = autocast if autocast not in (None, "off") else param_dtype
    if dtype in ("bfloat16", "float16"):
        return "bf16" if dtype == "bfloat16" else "fp16"
    if dtype and dtype.startswith("float8"):
        return "fp8"
    return "fp32" if float32_matmul_precision(torch_module) == "highest" else "tf32"


class MatmulPeak:
    """Enqueue once; poll until the events have run; then the figures, once."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._events: tuple[Any, Any] | None = None
        self._meta: dict[str, Any] = {}
        self.done = False

    def enqueue(self, precision: str) -> dict[str, Any] | None:
        """Start the measurement; a frame at once where it cannot run (the reason)."""
        self.done = True
        torch = self._torch
        repeats = REPEATS.get(precision, 0)
        self._meta = {"precision": precision, "device": torch.cuda.get_device_name()}
        if not repeats:
            return {**self._meta, "tflops": None, "reason": f"no matmul probe for {precision}"}
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        started = time.perf_counter()
        try:
            a = torch.randn(SIDE, SIDE, device="cuda", dtype=dtype)
            b = torch.randn(SIDE, SIDE, device="cuda", dtype=dtype)
            a @ b  # cuBLAS picks its kernel on the first call: not timed
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(repeats):
                a @ b
            end.record()
        except torch.OutOfMemoryError:
            return {**self._meta, "tflops": None, "reason": "no GPU memory left for the probe"}
        self._events = (start, end)
        self._meta["repeats"] = repeats
        self._meta["enqueue_ms"] = round((time.perf_counter() - started) * 1000.0, 2)
        return None

    def poll(self) -> dict[str, Any] | None:
        """The frame once the matmuls have run; None while they have not (never blocks)."""
        if self._events is None or not self._events[1].query():
            return None
        start, end = self._events
        self._events = None
        run_ms = start.elapsed_time(end)
        flops = 2 * SIDE**3 * self._meta["repeats"]
        tflops = flops / (run_ms / 1000.0) / 1e12 if run_ms > 0 else None
        return {**self._meta, "run_ms": round(run_ms, 3), "tflops": tflops, "reason": None}

    @property
    def pending(self) -> bool:
        return self._events is not None
