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

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import format as fmt
from ..session.stats import Observation, RankStats
from . import stragglers, throttle
from .stragglers import lagging_rank

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
# More workers need a core each to run on: most of one core free to the job (idle machine-wide
# and within its affinity and quota, less what the job uses: psutil) is the least that can
# carry another worker; the margin under 1.0 covers psutil's sampling jitter and the
# monitor's own 1-3% of a core. On the H100 an ImageNet-style loader with 4 workers at 95%
# and about 11 of 16 cores idle ran 3.1x faster with 16 workers (issue: diagnosis).
IDLE_CORES_FOR_WORKERS = 0.8
# Workers whose loading waits on something other than their CPU (storage, network, a sleep)
# need no core each: they overlap their waits. A Dataset sleeping 5 ms per item with no
# workers (training process at 15-26% CPU, data-wait 67%) on the 2-core dev box, busy with
# other processes, ran 5.3x faster with 4 workers (issue 29). Each worker is still a process
# with its own copy of the Dataset: at most this many per core the job may use.
WAITING_WORKERS_PER_CORE = 4
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
SYNCS_GAIN = 1.5
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
    rank: int | None = None  # the rank it names (a straggler), for a per-rank alert or panel
    ranks: tuple[int, ...] = ()  # every rank it names, where several are (a stall); rank first

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


def _one_worker_per_core(o: Observation) -> bool:
    room = o.room_cores
    return bool(o.workers and room and o.workers >= room and not _workers_idle(o))


def _cores_left(o: Observation) -> bool | None:
    """Whether another worker would get a core: one is free to the job (idle machine-wide,
    within its affinity and quota) and the workers do not already number one per core; None
    where unknown. With 16 workers on the 16-core H200 box at 82% each the machine read 2
    cores idle, yet 32 workers ran 12% slower (scheduling slack, not room for more workers:
    docs/diagnosis.md)."""
    if _one_worker_per_core(o):
        return False
    free = o.free_cores
    return None if free is None else free >= IDLE_CORES_FOR_WORKERS


def _others_hold_cores(o: Observation) -> bool:
    """Other processes use more of the machine than the job does: where no core is free,
    they, not the job's input work, hold them (a neighbour's job, a notebook, a CPU hog)."""
    others, job = o.others_cores, o.job_cores
    return others is not None and job is not None and others > job


def _loaders_cpu_bound(o: Observation) -> bool:
    """The processes that load the batches spend their time on the CPU: busy workers; with
    none, a training process at the busy line (it loads and steps on its own core)."""
    if o.workers:
        return _workers_busy(o)
    return o.main_cpu_pct is not None and o.main_cpu_pct >= MAIN_PROCESS_BUSY_PCT


def _loading_waits_elsewhere(o: Observation) -> bool:
    """No core is free, other processes hold them, and the job's loaders are not busy: the
    input waits on storage, a network, a sleep or the scheduler, not on its own CPU work.
    Workers overlap such waits without a core each (the sleep-bound Dataset of issue 29)."""
    return (
        _cores_left(o) is False
        and not _one_worker_per_core(o)
        and _others_hold_cores(o)
        and not _loaders_cpu_bound(o)
    )


def _waiting_workers(o: Observation) -> int:
    """Workers enough to overlap a wait that is not CPU work: the loaders deliver a batch per
    step now; to keep up with the step's compute alone they must deliver 1 / (1 - wait)
    times as many, each waiting as long as before."""
    current = max(1, o.workers or 0)
    share = min(0.95, _wait(o) / 100.0)
    wanted = math.ceil(current / (1.0 - share))
    room = o.room_cores or 2.0
    return max(current + 1, min(wanted, int(WAITING_WORKERS_PER_CORE * room)))


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


def _room_text(o: Observation) -> str:
    room = o.room_cores
    if room is None:
        return fmt.NA
    limited = o.cpu_count is not None and room < o.cpu_count
    return f"{room:g}" + (f" (of {o.cpu_count}: affinity, cgroup quota)" if limited else "")


def _use_text(o: Observation) -> str:
    """Who uses the busy cores: the job's processes, and the others."""
    job, others = o.job_cores, o.others_cores
    if others is None or job is None:
        return f"machine-wide CPU {fmt.pct(o.system_cpu_pct)}"
    return f"the job uses {job:.1f} cores, other processes {others:.1f}"


def _cores_evidence(o: Observation) -> str:
    free = o.free_cores
    if _one_worker_per_core(o):
        return (
            f"{o.workers} workers on {_room_text(o)} cores: one per core already "
            f"({_use_text(o)}; psutil)"
        )
    if free is None:
        return f"{_room_text(o)} cores, machine-wide use N/A (psutil)"
    return f"{free:.1f} of {_room_text(o)} cores free to the job ({_use_text(o)}; psutil)"


def _worker_evidence(o: Observation) -> str:
    if not o.workers:
        return (
            "no DataLoader workers: the training process loads every batch, at "
            f"{fmt.pct(o.main_cpu_pct)} CPU (psutil)"
        )
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
    waits = _loading_waits_elsewhere(o)
    if _cores_left(o) is False and not waits:
        return None
    cores = int(o.room_cores or 2)
    current = o.workers or 0
    evidence = [_wait_evidence(o), _worker_evidence(o), _cores_evidence(o)]
    if waits:  # the loaders wait, they do not compute: overlap the waits
        suggested = _waiting_workers(o)
        evidence.append(
            "the loading waits on something other than the job's CPU (storage, network, a "
            "sleep): workers overlap those waits and need no core each"
        )
    elif not current:
        # The training process does the loading: workers take it off the step (the
        # playbook's rung 1: 8 workers on 16 cores), one core left for the training process.
        suggested = max(1, min(cores - 1, max(2, cores // 2)))
    else:  # one per free core (the training process's use is counted in them already)
        free = o.free_cores
        added = max(1, round(free)) if free is not None else current  # unknown: double
        suggested = min(cores, current + added)
    if suggested <= current:
        return None
    wait_gain = _input_gain(o)
    gain = wait_gain if not current else min(wait_gain, suggested / current)
    busy = _workers_busy(o) or not current or waits
    evidence.append(_gpu_activity(o)[1])
    return Finding(
        "input.more_workers",
        f"Input-bound: {_waiter(o)}",
        tuple(evidence),
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
    if not (_input_bound(o) and _cores_left(o) is False) or _loading_waits_elsewhere(o):
        return None  # loaders that wait get more workers (more_workers, idle_workers)
    evidence = [_wait_evidence(o), _worker_evidence(o), _cores_evidence(o)]
    # Other processes hold the cores, the job's loaders busy on what they get: the shared
    # machine is the limit, and more workers would only take CPU from the others.
    shared = _others_hold_cores(o) and not _one_worker_per_core(o)
    no_workers = (
        "; more workers will not help: no core is free to the job"
        if o.workers and not shared
        else ""
    )
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
    if shared:
        title = "Input-bound: other processes hold the cores the input needs"
        action = (
            f"give the job cores of its own: other processes use {o.others_cores or 0:.1f} "
            f"cores (stop or move them; a cpuset or taskset for the job); or {action}"
        )
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
        rules_out=("workers",) if o.workers and not shared else (),
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
        _cores_evidence(o),
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
            + "the smallest images you can, resized on the GPU; more workers add little: "
            "they wait for the training process"
        )
        changes: tuple[Change, ...] = (Change("input_format", "gpu"),)
        if _float_batches(o):
            changes = (Change("input_format", "uint8"), *changes)
    else:
        action = (
            "cut what the training process does per batch: fewer bytes per batch (smaller "
            "dtypes), collate in the workers (a batched Dataset with batch_size=None), no "
            "per-batch Python work in the loop; more workers add little: they wait for it"
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
        # No "will not help" for workers: they wait, yet doubling them gained 1.07x on the
        # H200 (2026-11-23) and 1.08-1.10x on the H100 (2026-11-25, diagnosis scenario
        # main_process_bound): more batches in flight overlap the training process's unpacking.
        # Little, not nothing: the claim would be contradicted at the scorecard's 10%.
    )


def idle_workers(o: Observation) -> Finding | None:
    """The step waits for data while the workers idle: their compute is not the cause."""
    if not (_input_bound(o) and _workers_idle(o)) or _main_process_limits(o):
        return None
    if _cores_left(o) is False and not _others_hold_cores(o):
        return None  # the job's own work saturates its cores (input_saturated)
    restarts = o.persistent_workers is False and o.epochs >= 2
    suggested = _waiting_workers(o)
    if restarts:
        action = (
            "set persistent_workers=True (and keep one DataLoader): the workers are started "
            f"anew at every epoch ({o.epochs} epochs in {o.window_s or 0:.0f} s), and the step "
            "waits for their first batches"
        )
    else:
        # Workers that wait (storage, network, a sleep) deliver more batches by number; what
        # is not their wait shows between batches.
        action = (
            f"raise DataLoader num_workers to {suggested}: each worker waits on something "
            "other than its CPU (storage, network), and more of them overlap the waits; else "
            "look at what happens between batches: a DataLoader re-created per step, "
            "collation or copies in the training process (py-spy dump shows where it waits)"
        )
    gain = _input_gain(o)
    return Finding(
        "input.idle_workers",
        "Input-bound, yet the workers are mostly idle",
        (_wait_evidence(o), _worker_evidence(o), _cores_evidence(o), _gpu_activity(o)[1]),
        action,
        f"up to {gain:.1f}x",
        0.6 if restarts else 0.4,
        gain,
        changes=(Change("persistent_workers", True),)
        if restarts
        else (Change("workers", suggested),),
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


def _sync_gain_bound(o: Observation) -> tuple[float, str] | None:
    """The most removing the step's syncs can gain, from the GPU's busy time (NVML: the share
    of time a kernel runs). The host waits at a sync only while the GPU works, so the waits
    are at most that share (the step can shrink to 1 - busy); and the GPU can at most fill
    its idle time (1 / busy). On the H100/H200 corpus the measured gains sat under it: 1.03x
    and 1.10x at 24% and 29% busy (bound 1.32x, 1.41x), 1.60x and 1.56x at 56% and 62%
    (bound 1.79x, 1.61x) (docs/diagnosis.md). None without NVML."""
    util = o.gpu.util_pct
    if not o.uses_gpu or util is None:
        return None
    busy = min(max(util, 1.0), 100.0) / 100.0
    bound = 1.0 / max(busy, 1.0 - busy)
    return bound, f"GPU busy {fmt.pct(util)} of the time (NVML): syncs cost at most {bound:.2f}x"


def host_device_syncs(o: Observation) -> Finding | None:
    if o.syncs_per_step is None or o.syncs_per_step < SYNCS_PER_STEP:
        return None
    sites = [
        f"{site['file'].rsplit('/', 1)[-1]}:{site['line']} {site['op']} (x{site['count']})"
        for site in o.sync_sites[:5]
    ]
    evidence = [f"sync scan of one step: {o.syncs_per_step} synchronizing ops (hook)", *sites]
    gain, bounded = SYNCS_GAIN, _sync_gain_bound(o)
    if bounded is not None:
        gain = min(gain, bounded[0])
        evidence.append(bounded[1])
    return Finding(
        "syncs",
        f"{o.syncs_per_step} host-device syncs per step",
        tuple(evidence),
        "replace data-dependent ops (nonzero, unique, boolean masks, .item(), .cpu()) with "
        "fixed-shape ones (torch.where, masked reductions, ignore_index); log on the GPU",
        f"up to {gain:.1f}x" if bounded is not None else None,
        0.8,
        gain,
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
    evidence = [
        busy_text,
        "no autocast in the forward pass, parameters float32; " + _tf32_evidence(o),
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
    model = [audit.params, audit.grads, audit.optimizer]
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
    if o.model.param_dtype == "float32" and audit.params and audit.grads:
        halved = (audit.params + audit.grads) / 2
        fixes.append(f"bf16 parameters and gradients ({fmt.size(halved)})")
    if audit.optimizer:
        fixes.append(f"optimizer state in bf16 ({fmt.size(audit.optimizer / 2)})")
    if not fixes:
        return tuple(evidence), "a smaller batch before it OOMs"
    return tuple(evidence), "before it OOMs: " + "; ".join(fixes)


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
    lag = lagging_rank(o)
    if worst is None:
        return _comm_straggler(lag, o) if lag is not None else None
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
        evidence: tuple[str, ...] = (
            wait_line,
            step_line + ": the gradient all-reduce evens the ranks out",
        )
        if lag is not None and lag.rank is rank and lag.chronic:
            evidence += (stragglers.wait_line(lag),)
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
        rank=rank.who.rank,
    )


# -- transformer workloads (docs/advisor.md) ---------------------------------------------

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


def _transformer_math_busy(o: Observation) -> tuple[bool, str]:
    """A GPU job whose arithmetic is the work, not waiting on input."""
    if not o.uses_gpu or _wait(o) >= INPUT_DOMINANT_PCT:
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


def per_step_sync(o: Observation) -> Finding | None:
    """One or two syncs per step in the user's code (a logged loss.item(), a NaN check): the
    CPU waits for the GPU each step, then the GPU waits while the CPU prepares the next one.
    Worth it only while the GPU is short of busy."""
    count = o.syncs_per_step
    if count is None or not 1 <= count < SYNCS_PER_STEP or not o.uses_gpu:
        return None
    activity, activity_text = _gpu_activity(o)
    if activity is None or _gpu_busy(o) or _input_bound(o):
        return None
    busy_line = GPU_BUSY_SM_PCT if o.gpu.sm_active_pct is not None else GPU_BUSY_UTIL_PCT
    gain = min(SYNCS_GAIN, busy_line / max(activity, 5.0))
    bounded = _sync_gain_bound(o)
    if bounded is not None:
        gain = min(gain, bounded[0])
    sites = [
        f"{site['file'].rsplit('/', 1)[-1]}:{site['line']} {site['op']} (x{site['count']})"
        for site in o.sync_sites[:3]
    ]
    return Finding(
        "syncs.per_step",
        f"{count} host-device sync{'s' if count > 1 else ''} every step, and the GPU idles "
        "meanwhile",
        (f"sync scan of one step: {count} synchronizing ops (hook)", *sites, activity_text),
        "keep the per-step figures on the GPU (accumulate the loss in a tensor, check for "
        "NaN/inf with torch.isfinite on the GPU) and read them every N steps",
        f"up to {gain:.1f}x",
        0.5,
        gain,
        changes=(Change("syncs", False),),
    )


def _comm_straggler(lag: stragglers.Lag, o: Observation) -> Finding:
    """The rank the others wait for in the collectives (a compute straggler, or a stall)."""
    name = lag.rank.label
    cause = stragglers.cause_of(lag, o)
    if not lag.chronic:
        title = (
            f"Straggler: {name} stalled once (step {lag.stall_step}), and the other ranks "
            f"waited {fmt.ms(lag.stall_ms)} for it"
        )
        action = (
            f"a one-off, not a chronic lag: look at what {name} did then (a checkpoint, "
            "garbage collection, its storage or network); the ranks do not differ otherwise"
        )
        stall_ms = lag.stall_ms or 0.0
        evidence: tuple[str, ...] = (
            f"at step {lag.stall_step} the other ranks waited {fmt.ms(lag.stall_ms)} more in "
            f"collectives than {name} (hook), {stall_ms / lag.step_ms:.0f}x the "
            f"{fmt.ms(lag.step_ms)} step",
            stragglers.wait_line(lag) + ": over the window they wait alike",
        )
    else:
        cause_text = {
            "input": "waits for data",
            "GPU clocks": "runs on a slower (throttled) GPU",
            "shared GPU": "shares its GPU with another process",
            "compute": "computes slower",
        }.get(cause.name if cause else "", "arrives last at every collective")
        title = f"Straggler: {name} {cause_text}, and the other ranks wait for {name}"
        action = {
            "input": f"find what slows {name}'s input: its shard, its workers and CPUs",
            "GPU clocks": f"cool or re-power {name}'s GPU (nvidia-smi -q -d PERFORMANCE), or "
            "move the rank",
            "shared GPU": f"move the other process off {name}'s GPU (nvidia-smi lists it), or "
            "the job to GPUs of its own",
            "compute": f"find what slows {name}'s own work: its GPU (clocks, other processes "
            "on it), its host's CPUs (other jobs, NUMA), uneven work per rank",
        }.get(
            cause.name if cause else "",
            f"the cause is not measured: look at {name}'s GPU, host and input",
        )
        evidence = (
            stragglers.wait_line(lag),
            f"chronic: over the window's median step, {name} costs the others "
            f"{fmt.ms(lag.gap_ms)} of each {fmt.ms(lag.step_ms)} step",
            cause.evidence if cause else "no measured cause covers most of the gap",
        )
    gain = 1.0 / max(1.0 - min(lag.gap_ms, lag.step_ms) / lag.step_ms, 0.2) if lag.chronic else 1.0
    return Finding(
        "ranks.straggler",
        title,
        evidence,
        action + ("; the whole job runs at its pace" if lag.chronic else ""),
        f"up to {gain:.1f}x" if lag.chronic else None,
        0.7,
        max(gain, 1.01),
        rank=lag.rank.who.rank,
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


RULES: tuple[Callable[[Observation], Finding | None], ...] = (
    straggler,
    gpu_throttled,
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
    compile_transformer,
    attention_sdpa,
    optimizer_for_loop,
    per_step_sync,
)

# Findings that say the step is as it should be: no change of theirs is a speed-up to expect.
HEALTHY = ("gpu.bound", "gpu.memory_near_limit")


def findings(o: Observation | None) -> list[Finding]:
    """Every rule that fires, best first; empty with no observation (too few measured steps,
    or for a job without the hook, no window of py-spy samples)."""
    if o is None or (o.steps.steps == 0 and o.data_wait_source != "py-spy"):
        return []
    fired = [f for f in (rule(o) for rule in RULES) if f is not None]
    fired = [_seen_from_one_node(f, o) for f in fired]
    return stragglers.straggler_first(sorted(fired, key=lambda f: f.score, reverse=True), o)


# A node's monitor that sees some of a job's ranks cannot tell an input-bound job from a node
# whose input is a straggler: the other nodes' ranks may wait less. Its input findings say so
# and count for less (a weighting, not a measurement: the joined view is Prometheus's).
PARTIAL_VIEW_CONFIDENCE = 0.6


def _seen_from_one_node(finding: Finding, o: Observation) -> Finding:
    """An input finding of a monitor that sees fewer ranks than the job has, with that caveat."""
    seen = max(len(o.ranks), 1)
    if not finding.id.startswith("input.") or not o.world_size or o.world_size <= seen:
        return finding
    caveat = (
        f"this monitor sees {seen} of the job's {o.world_size} ranks (WORLD_SIZE; hook): "
        "the other nodes' ranks may wait less"
    )
    return replace(
        finding,
        evidence=(*finding.evidence, caveat),
        action=finding.action + "; first compare the other nodes' data-wait (Prometheus joins "
        "them; GputopTrainStraggler): where they wait less, this node's input is a straggler",
        confidence=finding.confidence * PARTIAL_VIEW_CONFIDENCE,
    )
