"""Rules that name what holds the step back, with the numbers that show it.

Each rule reads one ``Observation`` (the measured steps of one configuration, with the GPU
and CPU figures of the time they ran) and returns a ``Finding`` or None. Findings are ranked
by expected gain times confidence; the first is the headline. A finding proposes ``changes``
(what a knob of that role should become: the autopilot's plan, the diagnosis benchmark's
check) and names in ``rules_out`` the changes it claims will not help: a claim it makes only
with the evidence that proves it, shown in its own evidence.

docs/advisor.md has every rule, threshold and source; benchmarks/diagnosis.py checks each
headline against the measured gain of applying it on the scenario corpus.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import format as fmt
from ..session.stats import Observation, RankStats

# The PyTorch profiler's recommendations flag a DataLoader share above 5% of the step
# and GPU utilization under 50%; we use the same lines.
DATA_WAIT_PCT = 5.0
GPU_UNDERUSED_PCT = 50.0
# A wait on data only matters when the GPU idles meanwhile: at 80% SM activity (90% NVML
# utilization without GPM) the GPU is the bottleneck, whatever the DataLoader does.
GPU_BUSY_SM_PCT = 80.0
GPU_BUSY_UTIL_PCT = 90.0
# A worker this busy has no time left to give (psutil CPU %, one core = 100): the playbook's
# rung 4 on the H100 had 8 workers at 97-100% each while the step waited 27% for data.
WORKER_SATURATED_PCT = 85.0
# Workers this idle are not what the step waits for (on the H100 box even 15 workers of a
# CPU-bound pipeline averaged 22% or more): the wait comes from elsewhere.
WORKER_IDLE_PCT = 10.0
# More workers need a core each to run on: most of one idle core (machine-wide, psutil) is the
# least that can carry another worker; the margin under 1.0 covers psutil's sampling jitter
# and the monitor's own 1-3% of a core. On the H100 an ImageNet-style loader with 4 workers
# at 95% and about 11 of 16 cores idle ran 3.1x faster with 16 workers (issue: diagnosis).
IDLE_CORES_FOR_WORKERS = 0.8
# The training process at this CPU (one core = 100) while input-bound and the workers have
# time to spare: it, not the workers, is what the input waits for (pinning, unpacking).
MAIN_PROCESS_BUSY_PCT = 90.0
# Input-bound runs are first fixed at the input: other advice waits until the wait is small.
INPUT_DOMINANT_PCT = 20.0
# Memory: under a quarter used leaves room to double the batch; over 90% is near the edge.
MEMORY_TO_SPARE = 0.25
MEMORY_NEAR_LIMIT = 0.90
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
# A main process this busy with the GPU under-used is launch-bound (one core = 100).
MAIN_THREAD_BUSY_PCT = 90.0
LAUNCH_BOUND_GPU_PCT = 60.0
# Syncs per step worth a finding; GradScaler and an occasional .item() account for one or two.
SYNCS_PER_STEP = 3
# Pageable host-to-device copies: the playbook's rung 2 on the reference GPU took pinned memory
# from 1,408 to 1,806 img/s (+28%) on 19 MiB batches; batches under 1 MB copy in microseconds.
PAGEABLE_MIN_BYTES = 1_000_000
PINNED_GAIN = 1.3
# A straggler among a job's ranks. DDP ranks meet at every gradient all-reduce, so their step
# times come out equal and a rank slowed in its input shows by its data-wait share (the others
# wait inside backward instead). Unslowed, 2 gloo ranks on the dev box differed by at most 0.3
# points of data-wait and 1.01x in step p50 over 18 windows; a rank slowed by 15 ms of input
# per 52 ms step stood 40 points out (benchmarks/stragglers.py, docs/ranks.md). The lines sit
# far above the unslowed spread: a rank that costs the job 15% of its time is worth chasing.
STRAGGLER_WAIT_POINTS = 15.0
STRAGGLER_STEP_RATIO = 1.3
STRAGGLER_MIN_STEPS = 5  # each rank's measured steps in the window


@dataclass(frozen=True)
class Change:
    """What a knob of ``role`` should become (docs/knobs.md lists the roles). ``value`` is
    the target; for a number it is sized by the evidence (workers toward the idle cores)."""

    role: str
    value: Any


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    evidence: tuple[str, ...]  # each with its number and source
    action: str
    expected_gain: str | None
    confidence: float  # 0..1
    gain: float  # estimated speed-up factor, for ranking
    changes: tuple[Change, ...] = ()  # best first; empty: no knob can carry the action
    rules_out: tuple[str, ...] = field(default=())  # roles the evidence says will not help

    @property
    def score(self) -> float:
        return self.gain * self.confidence


# -- what the window shows ----------------------------------------------------------------


def _gpu_busy(o: Observation) -> bool:
    if not o.uses_gpu:
        return False
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct >= GPU_BUSY_SM_PCT
    return o.gpu.util_pct is not None and o.gpu.util_pct >= GPU_BUSY_UTIL_PCT


def _gpu_activity(o: Observation) -> tuple[float | None, str]:
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct, f"SM activity {fmt.pct(o.gpu.sm_active_pct)} (GPM)"
    return o.gpu.util_pct, f"GPU utilization {fmt.pct(o.gpu.util_pct)} (NVML)"


def _wait(o: Observation) -> float:
    return o.steps.data_wait_pct or 0.0


def _input_bound(o: Observation) -> bool:
    return o.steps.data_wait_pct is not None and _wait(o) >= DATA_WAIT_PCT and not _gpu_busy(o)


def _waiter(o: Observation) -> str:
    """Who waits for data: the GPU, where the job uses one; else the training step."""
    return "the GPU waits for data" if o.uses_gpu else "the step waits for data"


def _workers_idle(o: Observation) -> bool:
    return bool(o.workers) and o.worker_cpu_pct is not None and o.worker_cpu_pct < WORKER_IDLE_PCT


def _workers_busy(o: Observation) -> bool:
    return (
        bool(o.workers)
        and o.worker_cpu_pct is not None
        and (o.worker_cpu_pct >= WORKER_SATURATED_PCT)
    )


def _cores_left(o: Observation) -> bool | None:
    """Whether another worker would get a core: one is idle machine-wide and the workers do
    not already number one per core; None where unknown. With 16 workers on the 16-core H200
    box at 82% each the machine read 2 cores idle, yet 32 workers ran 12% slower (scheduling
    slack, not room for more workers: docs/diagnosis.md)."""
    if o.workers and o.cpu_count and o.workers >= o.cpu_count and not _workers_idle(o):
        return False
    idle = o.idle_cores
    return None if idle is None else idle >= IDLE_CORES_FOR_WORKERS


def _main_process_limits(o: Observation) -> bool:
    """The training process, not the workers, is what the input waits for: it is busy, the
    workers are not, and a core is idle (on a saturated machine the workers' low share is
    contention, not spare time). A CPU job's training process computes the model itself:
    there its CPU says nothing about the input."""
    return (
        o.uses_gpu
        and bool(o.workers)
        and not _workers_busy(o)
        and _cores_left(o) is not False
        and o.main_cpu_pct is not None
        and o.main_cpu_pct >= MAIN_PROCESS_BUSY_PCT
    )


def _image_batches(o: Observation) -> bool:
    """Batches of images (N, C, H, W) with 1, 3 or 4 channels: uint8 advice fits them."""
    shape = o.batch_shape
    return shape is not None and len(shape) == 4 and shape[1] in (1, 3, 4)


def _float_batches(o: Observation) -> bool:
    return bool(o.batch_dtype) and "float" in (o.batch_dtype or "")


def _input_gain(o: Observation) -> float:
    """Removing the wait shortens the step by the wait: at best 1 / (1 - share)."""
    share = min(0.95, _wait(o) / 100.0)
    return 1.0 / (1.0 - share)


def _wait_evidence(o: Observation) -> str:
    if o.data_wait_source == "py-spy":
        share = fmt.pct(o.steps.data_wait_pct)
        return f"the training thread waits for data in {share} of its samples (py-spy)"
    return f"data-wait {fmt.pct(o.steps.data_wait_pct)} of the step (hook)"


def _cores_evidence(o: Observation) -> str:
    idle = o.idle_cores
    if o.workers and o.cpu_count and o.workers >= o.cpu_count and not _workers_idle(o):
        return (
            f"{o.workers} workers on {o.cpu_count} cores: one per core already (machine-wide "
            f"CPU {fmt.pct(o.system_cpu_pct)}, psutil)"
        )
    if idle is None:
        return f"{o.cpu_count or fmt.NA} cores, machine-wide use N/A (psutil)"
    return (
        f"{idle:.1f} of {o.cpu_count} cores idle (machine-wide CPU "
        f"{fmt.pct(o.system_cpu_pct)}, psutil)"
    )


def _worker_evidence(o: Observation) -> str:
    if not o.workers:
        return "no DataLoader workers: the training process loads every batch (psutil)"
    return f"{o.workers} workers at {fmt.pct(o.worker_cpu_pct)} CPU each (psutil)"


def _main_evidence(o: Observation) -> str:
    return f"training process at {fmt.pct(o.main_cpu_pct)} CPU (psutil)"


def _batch_evidence(o: Observation) -> str:
    return (
        f"batches are {o.batch_dtype} {list(o.batch_shape or ())} "
        f"({fmt.size(o.batch_bytes)} each; hook)"
    )


# -- input ---------------------------------------------------------------------------------


def more_workers(o: Observation) -> Finding | None:
    """More workers pay while a core is idle and the workers, not the training process, are
    the limit: busy ones, or none at all. With none, the training process may already load
    on every core with torch's intra-op threads: on the 2-core CI box 0 workers ran the CPU
    image pipeline faster (877 samples/s) than 1, 2 or 3 workers (609-807)."""
    if not _input_bound(o) or _workers_idle(o) or _main_process_limits(o):
        return None
    if _cores_left(o) is False:
        return None
    cores = o.cpu_count or 2
    current = o.workers or 0
    if not current:
        # The training process does the loading: workers take it off the step (the
        # playbook's rung 1: 8 workers on 16 cores), one core left for the training process.
        suggested = max(1, min(cores - 1, max(2, cores // 2)))
    else:  # one per idle core (the training process's use is counted in them already)
        idle = o.idle_cores
        added = max(1, round(idle)) if idle is not None else current  # unknown: double
        suggested = min(cores, current + added)
    if suggested <= current:
        return None
    wait_gain = _input_gain(o)
    gain = wait_gain if not current else min(wait_gain, suggested / current)
    busy = _workers_busy(o) or not current
    return Finding(
        "input.more_workers",
        f"Input-bound: {_waiter(o)}",
        (_wait_evidence(o), _worker_evidence(o), _cores_evidence(o), _gpu_activity(o)[1]),
        f"raise DataLoader num_workers to {suggested}",
        f"up to {gain:.1f}x",
        0.8 if busy else 0.5,
        gain,
        changes=(Change("workers", suggested),),
    )


def input_saturated(o: Observation) -> Finding | None:
    """No core left while the step waits for data: the input pipeline itself must get
    cheaper. Each worker may show little CPU when there are more of them than cores (8 on
    the 2-core CI box read 20% each): the machine, not the worker count, is the limit then.
    With no workers, the training process's own threads hold the cores: workers might still
    use them better, so no claim is made about them."""
    if not (_input_bound(o) and _cores_left(o) is False):
        return None
    evidence = [_wait_evidence(o), _worker_evidence(o), _cores_evidence(o)]
    no_workers = "; more workers will not help: no core is idle" if o.workers else ""
    if o.uses_gpu and _image_batches(o):
        # Preprocessing on the GPU frees the cores of all the per-sample work; uint8 only of
        # the float conversion: with every core augmenting on the H200 box, GPU preprocessing
        # ran 4.1x faster (docs/diagnosis.md). uint8 is the fallback where nothing carries it.
        evidence += [_batch_evidence(o), _gpu_activity(o)[1]]
        finding_id = "input.gpu_preprocessing"
        title = "Input-bound: every core is busy preprocessing, and the GPU idles"
        action = (
            "move the preprocessing (decode, resize, augmentation) to the GPU and ship the "
            "smallest uint8 images you can"
            + (" (at least: uint8 batches, normalized on the GPU)" if _float_batches(o) else "")
            + no_workers
        )
        changes: tuple[Change, ...] = (Change("input_format", "gpu"),)
        if _float_batches(o):
            changes += (Change("input_format", "uint8"),)
    elif _image_batches(o) and _float_batches(o):  # a CPU job
        evidence.append(_batch_evidence(o))
        finding_id, title = "input.uint8", "Input-bound: every core is busy building float batches"
        action = (
            "send uint8 images (PILToTensor) and convert + normalize a whole batch at once in "
            f"the training step: a quarter of the bytes to build{no_workers}"
        )
        changes = (Change("input_format", "uint8"),)
    else:
        finding_id, title = "input.cpu_bound", "Input-bound: every core is busy preparing data"
        action = (
            "make each sample cheaper to prepare (cache decoded or tokenized samples, simpler "
            "transforms)"
            + ("" if not o.uses_gpu else ", or move the preprocessing to the GPU")
            + no_workers
        )
        changes = ()
    gain = _input_gain(o)
    return Finding(
        finding_id,
        title,
        tuple(evidence),
        action,
        f"up to {gain:.1f}x",
        0.7,
        gain,
        changes=changes,
        rules_out=("workers",) if o.workers else (),
    )


def main_process_bound(o: Observation) -> Finding | None:
    """The workers are ahead; the training process cannot take their batches any faster."""
    if not (_input_bound(o) and _main_process_limits(o)):
        return None
    evidence = [
        _wait_evidence(o),
        _main_evidence(o),
        f"{o.workers} workers at {fmt.pct(o.worker_cpu_pct)} CPU each: they wait for the "
        f"training process (psutil)",
    ]
    if o.batch_bytes:
        evidence.append(_batch_evidence(o) + (", pinned" if o.pin_memory else ""))
    if o.uses_gpu and _image_batches(o):
        # Fewer bytes per batch for the training process to unpack, pin and copy: uint8
        # (a quarter of float32), then small images resized on the GPU. On the H200 the demo
        # at batch 128 went from float to uint8 at 1.51x and was then held here again.
        action = (
            "fewer bytes per batch for the training process to unpack, pin and copy: "
            + ("uint8 images normalized on the GPU, then " if _float_batches(o) else "")
            + "the smallest images you can, resized on the GPU; more workers will not help: "
            "they wait for the training process"
        )
        changes: tuple[Change, ...] = (Change("input_format", "gpu"),)
        if _float_batches(o):
            changes = (Change("input_format", "uint8"), *changes)
    else:
        action = (
            "cut what the training process does per batch: fewer bytes per batch (smaller "
            "dtypes), collate in the workers (a batched Dataset with batch_size=None), no "
            "per-batch Python work in the loop; more workers will not help: they wait for it"
        )
        changes = ()
    gain = _input_gain(o)
    return Finding(
        "input.main_process",
        "Input-bound in the training process: it cannot take batches as fast as the workers "
        "make them",
        tuple(evidence),
        action,
        f"up to {gain:.1f}x",
        0.7,
        gain,
        changes=changes,
        rules_out=("workers",),
    )


def idle_workers(o: Observation) -> Finding | None:
    """The step waits for data while the workers idle: their compute is not the cause."""
    if not (_input_bound(o) and _workers_idle(o)) or _main_process_limits(o):
        return None
    if _cores_left(o) is False:
        return None  # a saturated machine starves them (input_saturated)
    restarts = o.persistent_workers is False and o.epochs >= 2
    if restarts:
        action = (
            "set persistent_workers=True (and keep one DataLoader): the workers are started "
            f"anew at every epoch ({o.epochs} epochs in {o.window_s or 0:.0f} s), and the step "
            "waits for their first batches"
        )
    else:
        action = (
            "look at what happens between batches: a DataLoader re-created per step, storage "
            "latency, collation or copies in the training process (py-spy dump shows where "
            "it waits)"
        )
    gain = _input_gain(o)
    return Finding(
        "input.idle_workers",
        "Input-bound, yet the workers are mostly idle",
        (_wait_evidence(o), _worker_evidence(o), _gpu_activity(o)[1]),
        action,
        f"up to {gain:.1f}x",
        0.6 if restarts else 0.4,
        gain,
        changes=(Change("persistent_workers", True),) if restarts else (),
    )


def pinned_copies(o: Observation) -> Finding | None:
    if o.pin_memory is not False or not o.uses_gpu or not o.batch_bytes:
        return None
    if o.batch_bytes < PAGEABLE_MIN_BYTES:
        return None
    evidence = [f"DataLoader pin_memory=False, {fmt.size(o.batch_bytes)} batches (hook)"]
    if o.pcie_rx_mibps is not None:
        evidence.append(f"PCIe RX {o.pcie_rx_mibps:.0f} MiB/s (NVML)")
    return Finding(
        "copies.pageable",
        "Host-to-device copies from pageable memory",
        tuple(evidence),
        "pin_memory=True in the DataLoader and .to(device, non_blocking=True)",
        f"up to {PINNED_GAIN:.1f}x",
        0.5,
        PINNED_GAIN,
        changes=(Change("pin_memory", True),),
    )


# -- the step ------------------------------------------------------------------------------


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
        "fixed-shape ones (torch.where, masked reductions, ignore_index); log on the GPU",
        None,
        0.8,
        1.5,
        changes=(Change("syncs", False),),
    )


def larger_batch(o: Observation) -> Finding | None:
    """A GPU short of its busy line with memory to spare: more work per kernel. Below the
    profiler's 50% it is the likely lever; up to the busy line (80% SM) it still paid on the
    H200: the demo went 1.38x from batch 32 to 64 and 1.26x to 128 (docs/benchmarks.md)."""
    activity, activity_text = _gpu_activity(o)
    used, total = o.gpu.mem_used_bytes, o.gpu.mem_total_bytes
    if not o.uses_gpu or activity is None or _gpu_busy(o) or not used or not total:
        return None
    if used / total >= MEMORY_TO_SPARE or _wait(o) >= INPUT_DOMINANT_PCT:
        return None
    busy_line = GPU_BUSY_SM_PCT if o.gpu.sm_active_pct is not None else GPU_BUSY_UTIL_PCT
    gain = min(2.0, busy_line / max(activity, 5.0))
    return Finding(
        "gpu.larger_batch",
        "GPU under-used with memory to spare",
        (activity_text, f"GPU memory {fmt.mem_pair(used, total)} (NVML)", _wait_evidence(o)),
        "raise the batch size (scale the learning rate with it; watch convergence)",
        f"up to {gain:.1f}x",
        0.6,
        gain,
        changes=(Change("batch_size", "double"),),
    )


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
    facts = o.model
    if not o.uses_gpu or facts.autocast != "off" or facts.param_dtype != "float32":
        return None
    if facts.capability is None or facts.capability < FP16_CAPABILITY:
        return None
    if _wait(o) >= INPUT_DOMINANT_PCT:
        return None  # a GPU that waits for data is not held back by its arithmetic
    busy, busy_text = _gpu_busy_for_math(o)
    if not busy:
        return None
    bf16 = facts.capability >= BF16_CAPABILITY
    dtype = "bfloat16" if bf16 else "float16"
    tf32 = "on" if facts.tf32_cudnn or facts.tf32_matmul else "off"
    evidence = [
        busy_text,
        f"no autocast in the forward pass, parameters float32; TF32 {tf32} (hook)",
        f"compute capability {facts.capability[0]}.{facts.capability[1]}: "
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
    return Finding(
        "gpu.mixed_precision",
        "The step's arithmetic runs in fp32 on a GPU with "
        f"{'bf16' if bf16 else 'fp16'} tensor cores",
        tuple(evidence),
        f"mixed precision: torch.autocast(device_type='cuda', dtype=torch.{dtype}) around the "
        "forward and the loss" + ("" if bf16 else " (fp16 needs a GradScaler)"),
        f"up to {gain:g}x",
        0.8,
        gain,
        # TF32 matmuls next: the fix that leaves the parameters and activations in fp32.
        changes=(Change("precision", "bf16" if bf16 else "fp16"),)
        + ((Change("matmul_precision", "high"),) if bf16 and not facts.tf32_matmul else ()),
    )


def _tensor_core_convolutions(o: Observation) -> str | None:
    """How convolutions reach the tensor cores: "bf16"/"fp16" autocast or "TF32"; None."""
    if o.precision in ("bf16", "fp16"):
        return o.precision
    facts = o.model
    tf32 = facts.capability is not None and facts.capability >= BF16_CAPABILITY
    return "TF32" if o.precision == "fp32" and facts.tf32_cudnn and tf32 else None


def channels_last(o: Observation) -> Finding | None:
    """Convolutions on tensor cores in the NCHW layout: cuDNN transposes around each."""
    via = _tensor_core_convolutions(o)
    if not o.uses_gpu or o.model.channels_last is not False or via is None:
        return None
    if _wait(o) >= INPUT_DOMINANT_PCT:
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


def launch_bound(o: Observation) -> Finding | None:
    activity, activity_text = _gpu_activity(o)
    main = o.main_cpu_pct
    if not o.uses_gpu or activity is None or activity >= LAUNCH_BOUND_GPU_PCT:
        return None
    if main is None or main < MAIN_THREAD_BUSY_PCT or _wait(o) >= DATA_WAIT_PCT:
        return None
    return Finding(
        "cpu.launch_bound",
        "Launch-bound: the CPU cannot issue kernels fast enough",
        (activity_text, _main_evidence(o), _wait_evidence(o)),
        # Fusion alone left the launch-bound MLP of the corpus where it was (0.98x on the
        # H200): what removes the launches is replaying the step as a CUDA graph.
        "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead'), or "
        "torch.cuda.graphs), or give each launch more work (a larger batch)",
        "up to 1.5x",
        0.5,
        1.5,
        changes=(Change("compile", "reduce-overhead"),),
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
        # A risk, not a speed-up: ranked above "GPU-bound (healthy)", which it qualifies.
        0.9,
        1.2,
    )


def gpu_bound(o: Observation) -> Finding | None:
    """The GPU is the bottleneck. What is left: fusion (compile), and more work per kernel
    while memory allows: SM activity saturates near its busy line while larger kernels still
    do more per second (the demo held 11,200 img/s at batch 128 and SM over 80% on the H200;
    the playbook's rung 8 runs batch 1024). Neither is a fix: each is tried, kept if it pays."""
    if not _gpu_busy(o) or o.steps.steps == 0:
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
            _gpu_activity(o)[1],
            _wait_evidence(o) if wait is not None else "no data-wait measured",
            f"tensor activity {fmt.pct(o.gpu.tensor_active_pct)} (GPM)",
        ),
        f"gains now come from doing less work per sample: {fusion}, a smaller model"
        + ("; or more work per kernel: a larger batch, memory allows it" if room else ""),
        None,
        0.9,
        1.0,
        changes=changes,
    )


def _others(ranks: tuple[RankStats, ...], one: RankStats, figure: str) -> float | None:
    values = [getattr(r.steps, figure) for r in ranks if r is not one]
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def straggler(o: Observation) -> Finding | None:
    """One rank holds the others back: its data-wait share, or its step time (ranks that do
    not meet every step), stands out from the median of the others."""
    ranks = tuple(r for r in o.ranks if r.steps.steps >= STRAGGLER_MIN_STEPS)
    if len(ranks) < 2:
        return None
    worst = None
    for rank in ranks:
        wait, others_wait = rank.steps.data_wait_pct, _others(ranks, rank, "data_wait_pct")
        step, others_step = rank.steps.step_ms_p50, _others(ranks, rank, "step_ms_p50")
        if wait is not None and others_wait is not None:
            excess = wait - others_wait
            if excess >= STRAGGLER_WAIT_POINTS and (worst is None or excess / 100 > worst[1]):
                worst = (rank, excess / 100, "data")
        if step and others_step:
            slower = 1.0 - others_step / step
            if step >= STRAGGLER_STEP_RATIO * others_step and (worst is None or slower > worst[1]):
                worst = (rank, slower, "step")
    if worst is None:
        return None
    rank, lost, kind = worst
    name = rank.label
    wait_line = (
        f"{name} data-wait {fmt.pct(rank.steps.data_wait_pct)} of its step, the other ranks "
        f"{fmt.pct(_others(ranks, rank, 'data_wait_pct'))} (median; hook)"
    )
    step_line = (
        f"{name} step p50 {fmt.ms(rank.steps.step_ms_p50)}, the other ranks "
        f"{fmt.ms(_others(ranks, rank, 'step_ms_p50'))} (median; hook)"
    )
    if kind == "data":
        title = f"Straggler: {name} waits for data, and the other ranks wait for {name}"
        action = (
            f"find what slows {name}'s input: its shard of the data (larger or slower files), "
            f"its DataLoader workers and CPUs (NUMA, other jobs on its cores), its host"
        )
        evidence = (wait_line, step_line + ": the gradient all-reduce evens the ranks out")
    else:
        title = f"Straggler: {name} steps slower than the other ranks"
        action = f"find what slows {name}: its GPU (clocks, throttling), its host, its input"
        evidence = (step_line, wait_line)
    gain = 1.0 / max(1.0 - lost, 0.2)
    return Finding(
        "ranks.straggler",
        title,
        evidence,
        action + "; the whole job runs at its pace",
        f"up to {gain:.1f}x",
        0.7,
        gain,
    )


RULES: tuple[Callable[[Observation], Finding | None], ...] = (
    straggler,
    more_workers,
    input_saturated,
    main_process_bound,
    idle_workers,
    pinned_copies,
    host_device_syncs,
    larger_batch,
    mixed_precision,
    channels_last,
    launch_bound,
    memory_near_limit,
    gpu_bound,
)

# Findings that say the step is as it should be: no change of theirs is a speed-up to expect.
HEALTHY = ("gpu.bound", "gpu.memory_near_limit")


def findings(o: Observation | None) -> list[Finding]:
    """Every rule that fires, best first; empty with no observation (too few measured steps,
    or for a job without the hook, no window of py-spy samples)."""
    if o is None or (o.steps.steps == 0 and o.data_wait_source != "py-spy"):
        return []
    fired = [f for f in (rule(o) for rule in RULES) if f is not None]
    return sorted(fired, key=lambda f: f.score, reverse=True)
