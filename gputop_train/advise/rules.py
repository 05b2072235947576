"""Rules that name what holds the step back, with the numbers that show it.

Each rule reads one ``Observation`` (a window of the session) and returns a ``Finding`` or
None. Findings are ranked by expected gain times confidence; the first is the headline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import format as fmt
from ..session.stats import Observation

# The PyTorch profiler's recommendations flag a DataLoader share above 5% of the step
# and GPU utilization under 50%; we use the same lines.
DATA_WAIT_PCT = 5.0
GPU_UNDERUSED_PCT = 50.0
# A wait on data only matters when the GPU idles meanwhile: at 80% SM activity (90% NVML
# utilization without GPM) the GPU is the bottleneck, whatever the DataLoader does.
GPU_BUSY_SM_PCT = 80.0
GPU_BUSY_UTIL_PCT = 90.0
# A worker this busy has no time left to give (psutil CPU %, one core = 100). Workers also
# run out when they hold half the cores: on the H100 box 8 and 15 workers averaged 37-60%
# CPU while the step still waited 26-68% for data (collation, pinning and the main process
# compete for the rest); adding workers there no longer pays (docs/benchmarks.md).
WORKER_SATURATED_PCT = 85.0
# Workers this idle are not what the step waits for (on the H100 box even 15 workers of a
# CPU-bound pipeline averaged 22% or more): the wait comes from elsewhere.
WORKER_IDLE_PCT = 10.0
# Input-bound runs are first fixed at the input: other advice waits until the wait is small.
INPUT_DOMINANT_PCT = 20.0
# Memory: under a quarter used leaves room to double the batch; over 90% is near the edge.
MEMORY_TO_SPARE = 0.25
MEMORY_NEAR_LIMIT = 0.90
# Tensor cores count as idle below this GPM any-tensor activity while SMs are busy; below
# GPU_UNDERUSED_PCT of SM activity the GPU mostly waits, and precision is not the problem yet.
TENSOR_IDLE_PCT = 5.0
SM_BUSY_FOR_TENSOR_PCT = GPU_UNDERUSED_PCT
# A main process this busy with the GPU under-used is launch-bound (one core = 100).
MAIN_THREAD_BUSY_PCT = 90.0
# Syncs per step worth a finding; GradScaler and an occasional .item() account for one or two.
SYNCS_PER_STEP = 3


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    evidence: tuple[str, ...]  # each with its number and source
    action: str
    expected_gain: str | None
    confidence: float  # 0..1
    gain: float  # estimated speed-up factor, for ranking

    @property
    def score(self) -> float:
        return self.gain * self.confidence


def _gpu_busy(o: Observation) -> bool:
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct >= GPU_BUSY_SM_PCT
    return o.gpu.util_pct is not None and o.gpu.util_pct >= GPU_BUSY_UTIL_PCT


def _gpu_activity(o: Observation) -> tuple[float | None, str]:
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct, f"SM activity {fmt.pct(o.gpu.sm_active_pct)} (GPM)"
    return o.gpu.util_pct, f"GPU utilization {fmt.pct(o.gpu.util_pct)} (NVML)"


def _workers_idle(o: Observation) -> bool:
    return bool(o.workers) and o.worker_cpu_pct is not None and o.worker_cpu_pct < WORKER_IDLE_PCT


def _workers_saturated(o: Observation) -> bool:
    """No more to gain from workers: each is busy, or they already hold half the cores."""
    if not o.workers or _workers_idle(o):
        return False
    busy = o.worker_cpu_pct is not None and o.worker_cpu_pct >= WORKER_SATURATED_PCT
    half_the_cores = o.cpu_count is not None and o.workers >= o.cpu_count // 2
    return busy or half_the_cores


def _input_gain(o: Observation) -> float:
    """Removing the wait shortens the step by the wait: at best 1 / (1 - share)."""
    share = min(0.95, (o.steps.data_wait_pct or 0.0) / 100.0)
    return 1.0 / (1.0 - share)


def _input_bound(o: Observation) -> bool:
    wait = o.steps.data_wait_pct
    return wait is not None and wait >= DATA_WAIT_PCT and not _gpu_busy(o)


def _wait_evidence(o: Observation) -> str:
    if o.data_wait_source == "py-spy":
        share = fmt.pct(o.steps.data_wait_pct)
        return f"the training thread waits for data in {share} of its samples (py-spy)"
    return f"data-wait {fmt.pct(o.steps.data_wait_pct)} of the step (hook)"


def _worker_evidence(o: Observation) -> str:
    if not o.workers:
        return "no DataLoader workers: the training process loads every batch (psutil)"
    return (
        f"{o.workers} workers at {fmt.pct(o.worker_cpu_pct)} CPU each, "
        f"{o.cpu_count or fmt.NA} cores (psutil)"
    )


def more_workers(o: Observation) -> Finding | None:
    if not _input_bound(o) or _workers_saturated(o) or _workers_idle(o):
        return None
    cores = o.cpu_count or 2
    suggested = max(2, min(8, cores - 1)) if not o.workers else min(cores - 1, 2 * o.workers)
    if o.workers and suggested <= o.workers:
        return None  # no core left for another worker
    gain = _input_gain(o)
    return Finding(
        "input.more_workers",
        "Input-bound: the GPU waits for data",
        (_wait_evidence(o), _worker_evidence(o), _gpu_activity(o)[1]),
        f"raise DataLoader num_workers to {suggested}",
        f"up to {gain:.1f}x",
        0.8 if not o.workers else 0.6,
        gain,
    )


def idle_workers(o: Observation) -> Finding | None:
    """The step waits for data while the workers idle: their compute is not the cause."""
    if not (_input_bound(o) and _workers_idle(o)):
        return None
    if o.persistent_workers is False:
        action = (
            "set persistent_workers=True (and keep one DataLoader): the workers are started "
            "anew at every epoch, and the step waits for their first batches"
        )
    else:
        action = (
            "look at what happens between batches: a DataLoader re-created per epoch, "
            "collation or copies in the training process (py-spy dump shows where it waits)"
        )
    gain = _input_gain(o)
    return Finding(
        "input.idle_workers",
        "Input-bound, yet the workers are mostly idle",
        (_wait_evidence(o), _worker_evidence(o), _gpu_activity(o)[1]),
        action,
        f"up to {gain:.1f}x",
        0.6 if o.persistent_workers is False else 0.4,
        gain,
    )


def smaller_transfers(o: Observation) -> Finding | None:
    if not (_input_bound(o) and _workers_saturated(o)):
        return None
    if not o.batch_dtype or "float" not in o.batch_dtype:
        return None
    gain = _input_gain(o)
    return Finding(
        "input.uint8",
        "Input-bound: the workers cannot keep up building float32 batches",
        (
            _wait_evidence(o),
            _worker_evidence(o),
            f"batches are {o.batch_dtype} {list(o.batch_shape or ())} "
            f"({fmt.size(o.batch_bytes)} each; hook)",
        ),
        "send uint8 images (PILToTensor) and convert + normalize on the GPU: "
        "a quarter of the bytes to build, pin and copy; more workers will not help",
        f"up to {gain:.1f}x",
        0.7,
        gain,
    )


def gpu_preprocessing(o: Observation) -> Finding | None:
    if not (_input_bound(o) and _workers_saturated(o)):
        return None
    if o.batch_dtype and "float" in o.batch_dtype:
        return None  # smaller_transfers comes first
    gain = _input_gain(o)
    return Finding(
        "input.gpu_preprocessing",
        "Input-bound: the input pipeline cannot keep up, and more workers will not fix it",
        (_wait_evidence(o), _worker_evidence(o), _gpu_activity(o)[1]),
        "move the preprocessing (resize, augmentation) to the GPU, or make it cheaper; "
        "ship the smallest images you can; more workers will not help",
        f"up to {gain:.1f}x",
        0.7,
        gain,
    )


def pinned_copies(o: Observation) -> Finding | None:
    if o.pin_memory is not False or o.gpu.util_pct is None or not o.batch_bytes:
        return None
    if o.batch_bytes < 1_000_000:  # small batches copy in microseconds either way
        return None
    evidence = [f"DataLoader pin_memory=False, {fmt.size(o.batch_bytes)} batches (hook)"]
    if o.pcie_rx_mibps is not None:
        evidence.append(f"PCIe RX {o.pcie_rx_mibps:.0f} MiB/s (NVML)")
    return Finding(
        "copies.pageable",
        "Host-to-device copies from pageable memory",
        tuple(evidence),
        "pin_memory=True in the DataLoader and .to(device, non_blocking=True)",
        "up to 1.3x",
        0.5,
        1.3,
    )


def host_device_syncs(o: Observation) -> Finding | None:
    if o.syncs_per_step is None or o.syncs_per_step < SYNCS_PER_STEP:
        return None
    sites = [
        f"{site['file'].rsplit('/', 1)[-1]}:{site['line']} {site['op']} (x{site['count']})"
        for site in o.sync_sites[:5]
    ]
    return Finding(
        "syncs",
        f"{o.syncs_per_step} host-device syncs per step",
        (f"sync scan of one step: {o.syncs_per_step} synchronizing ops (hook)", *sites),
        "replace data-dependent ops (nonzero, unique, boolean masks, .item(), .cpu()) with "
        "fixed-shape ones (torch.where, masked reductions, ignore_index)",
        None,
        0.8,
        1.5,
    )


def larger_batch(o: Observation) -> Finding | None:
    activity, activity_text = _gpu_activity(o)
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    if activity is None or activity >= GPU_UNDERUSED_PCT or not used or not total:
        return None
    if used / total >= MEMORY_TO_SPARE or (o.steps.data_wait_pct or 0) >= INPUT_DOMINANT_PCT:
        return None
    gain = min(2.0, GPU_UNDERUSED_PCT / max(activity, 5.0) + 0.5)
    return Finding(
        "gpu.larger_batch",
        "GPU under-used with memory to spare",
        (activity_text, f"GPU memory {fmt.mem_pair(used, total)} (NVML)", _wait_evidence(o)),
        "raise the batch size (scale the learning rate with it; watch convergence)",
        f"up to {gain:.1f}x",
        0.6,
        gain,
    )


def tensor_cores_idle(o: Observation) -> Finding | None:
    tensor, sm = o.gpu.tensor_active_pct, o.gpu.sm_active_pct
    if tensor is None or sm is None or tensor >= TENSOR_IDLE_PCT or sm < SM_BUSY_FOR_TENSOR_PCT:
        return None
    if o.precision in ("bf16", "fp16") or (o.steps.data_wait_pct or 0) >= INPUT_DOMINANT_PCT:
        return None  # (a GPU that waits for data is not held back by its precision)
    return Finding(
        "gpu.tensor_cores_idle",
        "Tensor cores idle: the math runs in fp32",
        (f"tensor activity {fmt.pct(tensor)} while SM activity {fmt.pct(sm)} (GPM)",),
        "mixed precision: torch.autocast(dtype=torch.bfloat16) (fp16 needs a GradScaler)",
        "up to 2x",
        0.6,
        2.0,
    )


def launch_bound(o: Observation) -> Finding | None:
    activity, activity_text = _gpu_activity(o)
    main = o.main_cpu_pct
    if activity is None or activity >= 60.0 or main is None or main < MAIN_THREAD_BUSY_PCT:
        return None
    if (o.steps.data_wait_pct or 0) >= DATA_WAIT_PCT:
        return None
    return Finding(
        "cpu.launch_bound",
        "Launch-bound: the CPU cannot issue kernels fast enough",
        (activity_text, f"training process at {fmt.pct(main)} CPU (psutil)", _wait_evidence(o)),
        "torch.compile the model (fewer, fused kernels) or capture CUDA graphs",
        "up to 1.5x",
        0.5,
        1.5,
    )


def memory_near_limit(o: Observation) -> Finding | None:
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    if not used or not total or used / total < MEMORY_NEAR_LIMIT:
        return None
    return Finding(
        "gpu.memory_near_limit",
        "GPU memory near its limit",
        (f"GPU memory {fmt.mem_pair(used, total)} (NVML)",),
        "activation checkpointing, mixed precision, or a smaller batch before it OOMs",
        None,
        0.7,
        1.2,
    )


def gpu_bound(o: Observation) -> Finding | None:
    wait = o.steps.data_wait_pct
    if not _gpu_busy(o) or o.steps.steps == 0:
        return None
    return Finding(
        "gpu.bound",
        "GPU-bound: the GPU is the bottleneck (healthy)",
        (
            _gpu_activity(o)[1],
            _wait_evidence(o) if wait is not None else "no data-wait measured",
            f"tensor activity {fmt.pct(o.gpu.tensor_active_pct)} (GPM)",
        ),
        "gains now come from doing less work per sample: precision, fusion, a smaller model",
        None,
        0.9,
        1.0,
    )


RULES: tuple[Callable[[Observation], Finding | None], ...] = (
    more_workers,
    idle_workers,
    smaller_transfers,
    gpu_preprocessing,
    pinned_copies,
    host_device_syncs,
    larger_batch,
    tensor_cores_idle,
    launch_bound,
    memory_near_limit,
    gpu_bound,
)


def findings(o: Observation | None) -> list[Finding]:
    """Every rule that fires, best first; empty before there is anything to judge: measured
    steps, or for a job without the hook, a window of py-spy samples."""
    if o is None or (o.steps.steps == 0 and o.data_wait_source != "py-spy"):
        return []
    fired = [f for f in (rule(o) for rule in RULES) if f is not None]
    return sorted(fired, key=lambda f: f.score, reverse=True)
