"""One step's GPU kernels, once: how many, and what share of their time is matrix math.

An eager transformer spends a large share of its kernel time outside matrix multiplies
(layer norms, GELUs, residual adds, softmax, the optimizer's element-wise updates, each a
kernel that reads and writes memory); that share is what ``torch.compile``'s fusion takes
back, and what tells an eager model with headroom from a healthy one. torch.profiler (CUPTI)
records the kernels of one step; stopping it waits for the step's kernels, once per run
(the frame says how long the probe took).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from typing import Any

# Kernel names of matrix units' work: cuBLAS/cuBLASLt/CUTLASS GEMMs (sm90_xmma, nvjet,
# cutlass, ampere_*gemm), fused attention (flash, fmha, cuDNN SDPA) and cuDNN convolutions.
MATH_KERNEL = re.compile(
    r"gemm|xmma|cutlass|nvjet|wgmma|cublas|matmul|hmma|s16816|s1688|flash|fmha|attention"
    r"|attn|conv|cudnn|implicit|winograd|fprop|dgrad|wgrad",
    re.IGNORECASE,
)


TEARDOWN_ENV = "TEARDOWN_CUPTI"


class KernelProfile:
    """Profiles the CUDA kernels of one step (start at its first batch, stop at its end)."""

    def __init__(self) -> None:
        self._profiler: Any = None
        self.done = False

    @property
    def active(self) -> bool:
        return self._profiler is not None

    def start(self) -> None:
        """Refused (RuntimeError) where CUPTI would stay attached after the profile: Kineto
        finalizes CUPTI at the end of a trace only with TEARDOWN_CUPTI=1, and left attached
        it slowed training 10-20% for the rest of the run (pytorch/pytorch#144455, #146604);
        a CUDA older than 12.6 crashed re-attaching it after a teardown where CUDA graphs
        run (torch/profiler/profiler.py), so there the probe is off."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        if os.environ.setdefault(TEARDOWN_ENV, "1") != "1":
            raise RuntimeError(f"{TEARDOWN_ENV}={os.environ[TEARDOWN_ENV]}: no kernel profile")
        cuda = tuple(int(v) for v in (torch.version.cuda or "0.0").split(".")[:2])
        if cuda < (12, 6):
            raise RuntimeError(f"CUDA {torch.version.cuda}: no kernel profile (CUPTI teardown)")
        self._profiler = profile(activities=[ProfilerActivity.CUDA])
        self._profiler.__enter__()

    def stop(self) -> dict[str, Any]:
        profiler, self._profiler = self._profiler, None
        self.done = True
        started = time.perf_counter()
        profiler.__exit__(None, None, None)
        facts = kernel_facts(profiler.profiler.kineto_results.events())
        facts["probe_ms"] = round((time.perf_counter() - started) * 1000.0, 1)
        return facts


def kernel_facts(events: Any) -> dict[str, Any]:
    """Kernels, their time and the share outside matrix math, from profiler events."""
    kernels, total_ns, math_ns, generated = 0, 0, 0, 0
    others: Counter[str] = Counter()
    for event in events:
        if "cuda" not in str(event.device_type()).lower():
            continue
        name = event.name()
        if name.startswith(("Memcpy", "Memset")):
            continue
        duration = int(event.duration_ns())
        kernels += 1
        total_ns += duration
        generated += name.startswith("triton_")  # torch.compile's (Inductor's) kernels
        if MATH_KERNEL.search(name):
            math_ns += duration
        else:
            others[name[:60]] += duration
    share = None if not total_ns else round(100.0 * (total_ns - math_ns) / total_ns, 1)
    return {
        "kernels": kernels,
        "triton_kernels": generated,
        "kernel_ms": round(total_ns / 1e6, 3),
        "non_math_pct": share,
        "top_non_math": [name for name, _ in others.most_common(3)],
    }
