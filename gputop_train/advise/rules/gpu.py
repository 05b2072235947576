"""GPU rules: how the job's GPUs are used (under-used with memory to spare, launch-bound,
GPU-bound) and what holds them from outside (throttled clocks, another process on them)."""

from __future__ import annotations

from ... import format as fmt
from ...session.stats import Observation
from .. import shared_gpu, throttle
from .finding import Change, Finding
from .window import (
    DATA_WAIT_PCT,
    GPU_BUSY_SM_PCT,
    GPU_BUSY_UTIL_PCT,
    INPUT_DOMINANT_PCT,
    gpu_activity,
    gpu_busy,
    main_evidence,
    wait_evidence,
    wait_pct,
)

# Memory: under a quarter used leaves room to double the batch.
MEMORY_TO_SPARE = 0.25
# A main process this busy with the GPU under-used is launch-bound (one core = 100).
MAIN_THREAD_BUSY_PCT = 90.0
LAUNCH_BOUND_GPU_PCT = 60.0


def larger_batch(o: Observation) -> Finding | None:
    """A GPU short of its busy line with memory to spare: more work per kernel. Below the
    profiler's 50% it is the likely lever; up to the busy line (80% SM) it still paid on the
    H200: the demo went 1.38x from batch 32 to 64 and 1.26x to 128 (docs/benchmarks.md)."""
    activity, activity_text = gpu_activity(o)
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    if not o.uses_gpu or activity is None or gpu_busy(o) or not used or not total:
        return None
    if used / total >= MEMORY_TO_SPARE or wait_pct(o) >= INPUT_DOMINANT_PCT:
        return None
    busy_line = GPU_BUSY_SM_PCT if o.gpu.sm_active_pct is not None else GPU_BUSY_UTIL_PCT
    gain = min(2.0, busy_line / max(activity, 5.0))
    return Finding(
        "gpu.larger_batch",
        "GPU under-used with memory to spare",
        (activity_text, f"GPU memory {fmt.mem_pair(used, total)} (NVML)", wait_evidence(o)),
        "raise the batch size (scale the learning rate with it; watch convergence)",
        f"up to {gain:.1f}x",
        0.6,
        gain,
        changes=(Change("batch_size", "double"),),
    )


def launch_bound(o: Observation) -> Finding | None:
    activity, activity_text = gpu_activity(o)
    main = o.main_cpu_pct
    if not o.uses_gpu or activity is None or activity >= LAUNCH_BOUND_GPU_PCT:
        return None
    if main is None or main < MAIN_THREAD_BUSY_PCT or wait_pct(o) >= DATA_WAIT_PCT:
        return None
    return Finding(
        "cpu.launch_bound",
        "Launch-bound: the CPU cannot issue kernels fast enough",
        (activity_text, main_evidence(o), wait_evidence(o)),
        # Fusion alone left the launch-bound MLP of the corpus where it was (0.98x on the
        # H200): what removes the launches is replaying the step as a CUDA graph.
        "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead'), or "
        "torch.cuda.graphs), or give each launch more work (a larger batch)",
        "up to 1.5x",
        0.5,
        1.5,
        changes=(Change("compile", "reduce-overhead"),),
    )


def gpu_bound(o: Observation) -> Finding | None:
    """The GPU is the bottleneck. What is left: fusion (compile), and more work per kernel
    while memory allows: SM activity saturates near its busy line while larger kernels still
    do more per second (the demo held 11,200 img/s at batch 128 and SM over 80% on the H200;
    the playbook's rung 8 runs batch 1024). Neither is a fix: each is tried, kept if it pays."""
    if not gpu_busy(o) or o.steps.steps == 0:
        return None
    wait = o.steps.data_wait_pct
    compiled = o.model.compiled
    fusion = "torch.compile (fusion)" if compiled is False else "fusion and fewer FLOPs per sample"
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    room = bool(used and total and used / total < MEMORY_TO_SPARE)
    changes: tuple[Change, ...] = (Change("compile", True),) if compiled is False else ()
    if room:
        changes += (Change("batch_size", "double"),)
    return Finding(
        "gpu.bound",
        "GPU-bound: the GPU is the bottleneck (healthy)",
        (
            gpu_activity(o)[1],
            wait_evidence(o) if wait is not None else "no data-wait measured",
            f"tensor activity {fmt.pct(o.gpu.tensor_active_pct)} (GPM)",
        ),
        f"gains now come from doing less work per sample: {fusion}, a smaller model"
        + ("; or more work per kernel: a larger batch, memory allows it" if room else ""),
        None,
        0.9,
        1.0,
        changes=changes,
    )


def gpu_throttled(o: Observation) -> Finding | None:
    """The job's GPUs (any of them) run under their clock ceiling for heat or power (NVML's
    clock-event reasons; advise/throttle.py says which count)."""
    if not o.uses_gpu:
        return None
    held = [(c, reasons) for c in o.gpu_clocks if (reasons := throttle.throttled(c))]
    if not held:
        return None
    ratios = [c.clock_ratio for c, _ in held if c.clock_ratio]
    gain = 1.0 / min(ratios) if ratios else 1.05
    several = len(held) > 1
    which = ", ".join(str(c.index) for c, _ in held)
    named = ", ".join(sorted({r for _, rs in held for r in rs}))
    return Finding(
        "gpu.throttled",
        f"GPU{'s' if several else ''} {which} run{'' if several else 's'} throttled ({named})",
        tuple(throttle.evidence_line(c, rs) for c, rs in held),
        "check cooling and power: nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER on the host "
        "shows the reasons and limits; in a multi-GPU job one throttled GPU slows every rank",
        f"up to {gain:.2f}x" if ratios else None,
        0.6,
        gain,
    )


def gpu_shared(o: Observation) -> Finding | None:
    """Another process on one of the job's GPUs takes its SM time or memory (NVML's
    per-process figures; advise/shared_gpu.py)."""
    if not o.uses_gpu:
        return None
    held = [(gpu, users) for gpu in o.gpus if (users := shared_gpu.shared(gpu))]
    if not held:
        return None
    shares = [s for _, users in held if (s := shared_gpu.sm_share(users)) is not None]
    worst = max(shares) if shares else None
    # The job gets the other's share back once it is gone: that much more GPU time.
    gain = 1.0 / (1.0 - worst / 100.0) if worst is not None and worst < 90.0 else 1.05
    which = ", ".join(str(gpu.index) for gpu, _ in held)
    several = len(held) > 1
    other = held[0][1][0]
    who = f"PID {other.pid}" + (f" ({other.user})" if other.user else "")
    taken = f", {fmt.pct(worst)} of its SM time" if worst is not None else ""
    return Finding(
        "gpu.shared",
        f"GPU{'s' if several else ''} {which} shared with another process: {who}{taken}",
        tuple(shared_gpu.user_line(gpu, u) for gpu, users in held for u in users),
        "the job's kernels wait behind the other process's: move one of them to a free GPU "
        "(CUDA_VISIBLE_DEVICES), or stop the other; the GPU panel lists who uses each GPU",
        f"up to {gain:.2f}x" if worst is not None else None,
        0.7,
        max(gain, 1.01),
    )
