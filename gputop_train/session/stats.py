"""Derived figures, computed once per snapshot from the raw series; pure functions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from .. import wire
from ..samples import GpuSample, ProcSample
from . import gpu_table
from .breakdown import StepParts, host_gap_pct, step_parts
from .clocks import GpuClocks
from .comm import CommStats, KeptFigures, StepFigures, comm_by_pid, figures_by_pid
from .job_gpus import GpuFigures, JobGpus
from .steps import Step
from .workload import Workload


@dataclass(frozen=True)
class StepStats:
    """Training progress over a window. None means N/A (nothing measured), never zero."""

    steps: int
    steps_per_s: float | None
    samples_per_s: float | None
    step_ms_p50: float | None
    step_ms_p95: float | None
    data_wait_pct: float | None
    gpu_time_pct: float | None
    tokens_per_s: float | None = None  # every rank's, like samples/s
    parts: StepParts | None = None  # the primary's step breakdown (docs/steps.md)
    # Host time outside the phases before each forward, % of step time: the data-wait of
    # a loop without a DataLoader (parts.data_source "host gap").
    host_gap_pct: float | None = None


@dataclass(frozen=True)
class GpuStats:
    """NVML figures of the job's GPUs over a window, a field per row of
    ``gpu_table.JOB_FIELDS``: activity the mean over GPUs and samples; memory the fullest
    GPU's (the headroom a larger batch has: per GPU, never a sum); power the sum over the
    job's GPUs of each one's mean."""

    util_pct: float | None
    sm_active_pct: float | None
    tensor_active_pct: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    gpus: int = 0  # how many GPUs the figures are over


@dataclass(frozen=True)
class ProcStats:
    workers: int
    workers_cpu_pct: float | None
    main_cpu_pct: float | None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def step_stats(steps: Sequence[Step], primary_pid: int | None) -> StepStats:
    """Rates are summed work over summed step time, so they hold for any window alignment.

    Samples/s adds every rank's throughput; steps/s and the step times come from the
    primary process (rank 0, or the first hooked process).
    """
    if not steps:
        return StepStats(0, None, None, None, None, None, None)
    by_pid: dict[int, list[Step]] = {}
    for step in steps:
        if step.step_ms is not None:
            by_pid.setdefault(step.pid, []).append(step)
    if not by_pid:
        return StepStats(0, None, None, None, None, None, None)
    primary = by_pid.get(primary_pid or -1) or next(iter(by_pid.values()))
    step_ms = [s.step_ms for s in primary if s.step_ms is not None]
    total_s = sum(step_ms) / 1000.0
    samples_per_s = _sum_rates(by_pid.values())
    tokens_per_s = _sum_rates(by_pid.values(), _TOKENS)
    timed_data = [s for s in primary if s.data_ms is not None]
    timed_gpu = [s for s in primary if s.gpu_ms is not None]
    return StepStats(
        steps=len(primary),
        steps_per_s=len(primary) / total_s if total_s > 0 else None,
        samples_per_s=samples_per_s,
        step_ms_p50=percentile(step_ms, 50),
        step_ms_p95=percentile(step_ms, 95),
        data_wait_pct=_share(timed_data, "data_ms"),
        gpu_time_pct=_share(timed_gpu, "gpu_ms"),
        tokens_per_s=tokens_per_s,
        parts=step_parts(primary),
        host_gap_pct=host_gap_pct(primary),
    )


@dataclass(frozen=True)
class RankIdentity:
    """Who a hooked process is in its job (from its hello); None where not told."""

    pid: int
    rank: int | None
    local_rank: int | None
    host: str | None


@dataclass(frozen=True)
class RankStats:
    """One process's own figures over a window (each rank of a DDP job), with its totals."""

    who: RankIdentity
    steps: StepStats
    total_steps: int
    total_samples: int | None
    gpus: tuple[int, ...] = ()  # the GPUs (NVML index) it has held memory on, so far
    comm: CommStats | None = None  # its wait in collectives; None where not measured
    # Its steps, oldest first, over the span the straggler verdict cuts into its windows
    # (advise/stragglers.py): the advisor's window (the steps given), or a longer span given.
    held: tuple[StepFigures, ...] = ()

    @property
    def label(self) -> str:
        return f"rank {self.who.rank}" if self.who.rank is not None else f"PID {self.who.pid}"


def rank_stats(
    steps: Sequence[Step],
    processes: Sequence[RankIdentity],
    last_step: dict[int, int],
    samples: dict[int, int],
    gpus: dict[int, set[int]] | None = None,
    known: dict[int, StepStats] | None = None,
    held_steps: Sequence[Step] | None = None,
    kept: KeptFigures | None = None,
) -> tuple[RankStats, ...]:
    """Each process's figures over ``steps`` (its steps only), ordered by rank then PID;
    ``gpus`` the GPUs each PID has been seen on (NVML); ``known`` figures already computed
    over the same steps, by PID; ``held_steps`` a longer span for the verdict than ``steps``;
    ``kept`` each step's verdict figures built before (session/comm.py)."""
    known = known or {}
    by_pid: dict[int, list[Step]] = {p.pid: [] for p in processes if p.pid not in known}
    for step in steps:
        if step.pid in by_pid:
            by_pid[step.pid].append(step)
    ordered = sorted(processes, key=lambda p: (p.rank is None, p.rank or 0, p.pid))
    comm = comm_by_pid(steps, [p.pid for p in processes])
    held = figures_by_pid(
        steps if held_steps is None else held_steps, [p.pid for p in processes], kept
    )
    return tuple(
        RankStats(
            who=who,
            steps=known[who.pid] if who.pid in known else step_stats(by_pid[who.pid], who.pid),
            total_steps=last_step.get(who.pid, 0),
            total_samples=samples.get(who.pid),
            gpus=tuple(sorted((gpus or {}).get(who.pid, ()))),
            comm=comm.get(who.pid),
            held=held.get(who.pid, ()),
        )
        for who in ordered
    )


# Sums over a window's steps run in C (map + attrgetter): a snapshot of a fast job's minute
# holds thousands of steps, and generator expressions made these sums most of its 2 ms.
_STEP_MS, _SAMPLES, _TOKENS = attrgetter("step_ms"), attrgetter("samples"), attrgetter("tokens")


def _sum_rates(groups: Iterable[list[Step]], count: attrgetter = _SAMPLES) -> float | None:
    """Each group's counted work over its counted steps' time, summed over groups."""
    rate, known = 0.0, False
    for group in groups:
        counted = [s for s in group if count(s) is not None]
        seconds = sum(map(_STEP_MS, counted)) / 1000.0
        if counted and seconds > 0:
            rate += sum(map(count, counted)) / seconds
            known = True
    return rate if known else None


def _share(steps: list[Step], field_name: str) -> float | None:
    total = sum(map(_STEP_MS, steps))
    if not steps or total <= 0:
        return None
    part = sum(map(attrgetter(field_name), steps))
    return min(100.0, 100.0 * part / total)


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def gpu_stats(
    samples: Sequence[tuple[GpuSample, ...]], over_window: gpu_table.OverWindow | None = None
) -> GpuStats:
    """The job's figures over its GPUs' samples (session/job_gpus.py), each formed as
    ``gpu_table.JOB_FIELDS`` says: a GPU's window figure, then over the GPUs (activity the
    mean, memory the fullest GPU's, power the sum). ``over_window``: every row of a GPU's
    window, kept (session/gpu_windows.py); without it, the job's rows alone are computed."""
    per_gpu = [
        over_window(own) if over_window else gpu_table.over_window(own, gpu_table.JOB_FIELDS)
        for own in gpu_table.by_gpu(samples).values()
    ]
    if not per_gpu:
        return GpuStats(None, None, None, None, None, None)
    return GpuStats(**gpu_table.over_gpus(per_gpu), gpus=len(per_gpu))


def _sum_known(values: Iterable[float | int | None]) -> float | int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def proc_stats(processes: Sequence[ProcSample]) -> ProcStats:
    workers = [p for p in processes if p.role == "worker"]
    mains = [p for p in processes if p.role == "main"]
    return ProcStats(
        workers=len(workers),
        workers_cpu_pct=_sum_known(p.cpu_pct for p in workers) if workers else None,
        main_cpu_pct=_sum_known(p.cpu_pct for p in mains) if mains else None,
    )


def capability(model: wire.Model) -> tuple[int, int] | None:
    """The CUDA compute capability of the job's device, as the hook's ``model`` fact says."""
    found = model.capability or []
    return (found[0], found[1]) if len(found) >= 2 else None


def precision(model: wire.Model) -> str | None:
    """ "bf16", "fp16" or "fp32": the autocast dtype, else the parameters' dtype."""
    dtype = model.autocast if model.autocast not in (None, "off") else model.param_dtype
    if model.autocast is None and model.param_dtype == "float32":
        return None  # compiled code may autocast inside its graph: unknown
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype or "")


@dataclass(frozen=True)
class Observation:
    """Everything the advisor looks at, over one window (the live one, or one phase): the
    measured steps of one configuration, and the GPU and CPU figures of the time they ran."""

    steps: StepStats
    gpu: GpuStats
    gpu_name: str | None
    pcie_rx_mibps: float | None
    # One loader's DataLoader workers: the primary rank's own loader as its hook says
    # (num_workers), else the psutil count over the node's ranks; never a sum over ranks.
    workers: int | None
    worker_cpu_pct: float | None  # mean per worker, % of one core
    main_cpu_pct: float | None
    cpu_count: int | None
    batch_dtype: str | None
    batch_shape: tuple[int, ...] | None
    batch_bytes: int | None
    pin_memory: bool | None
    persistent_workers: bool | None
    syncs_per_step: int | None
    sync_sites: tuple[wire.SyncSite, ...]
    flops_per_sample: float | None
    # What the step runs in: the hook's ``model`` fact, as the wire checked it (all None
    # without one).
    model: wire.Model = field(default_factory=wire.Model)
    flops_per_step: float | None = None  # FlopCounterMode over one whole optimizer step
    workload: Workload = field(default_factory=Workload)
    # Where steps.data_wait_pct comes from: the hook's step timer, or, for a job without the
    # hook, the share of py-spy samples in which the training thread waited on the DataLoader.
    data_wait_source: str = "hook"
    system_cpu_pct: float | None = None  # busy share of all the machine's cores (psutil)
    epochs: int = 0  # DataLoader epochs (iterators) started within the window
    window_s: float | None = None  # the seconds of steps the window covers
    # Each rank's own figures when the job has several hooked processes (torchrun); else ().
    ranks: tuple[RankStats, ...] = ()
    world_size: int | None = None  # the job's ranks on every node (WORLD_SIZE); None: unknown
    # Every process of the job together (% of one core, psutil), and the cores the job may
    # use (affinity, cgroup quota); None where not measured.
    job_cpu_pct: float | None = None
    usable_cores: float | None = None
    gpu_clocks: tuple[GpuClocks, ...] = ()  # each GPU's clocks and throttle reasons (NVML)
    # The job's GPUs, each over the window (session/job_gpus.py), and which they are and why.
    gpus: tuple[GpuFigures, ...] = ()
    job_gpus: JobGpus | None = None
    # The memory audit (hook/memory_audit.py): parameters, gradients, optimizer state,
    # allocator peaks, retries, OOMs; None before the first audit or without CUDA.
    memory: wire.MemoryAudit | None = None
    # Why samples/tokens from the forward and the step breakdown are N/A, when they are
    # (the step_parts fact); and the module whose forwards are timed.
    step_parts_reason: str | None = None
    timed_model: str | None = None
    # The training processes on this node, each with its own loader (psutil "main" roles);
    # the room for workers is shared between them.
    local_ranks: int = 1
    # Mean % of one core each worker was ready to run but waited for a CPU (run-queue wait,
    # collect/run_wait.py); None: not measured.
    worker_run_wait_pct: float | None = None
    # The same of the training process (its threads together, as ``main_cpu_pct``): a loader
    # with no workers loads in it.
    main_run_wait_pct: float | None = None
    # The most workers the job's workers knob takes (the script's, else the hook's built-in
    # one, as the autopilot picks it); None: no such knob.
    workers_max: int | None = None
    # Where the script constructed the DataLoader of the latest loader fact (hook); None:
    # not seen (a loader built before the hook, or by a library it could not tell apart).
    loader_site: wire.CodeSite | None = None

    @property
    def precision(self) -> str | None:
        return precision(self.model)

    @property
    def idle_cores(self) -> float | None:
        """Cores no process on the machine used over the window (psutil, system-wide)."""
        if self.cpu_count is None or self.system_cpu_pct is None:
            return None
        return self.cpu_count * max(0.0, 100.0 - self.system_cpu_pct) / 100.0

    @property
    def room_cores(self) -> float | None:
        """The cores the job may use: the machine's, bounded by its affinity and quota."""
        known = [c for c in (self.cpu_count, self.usable_cores) if c is not None]
        return float(min(known)) if known else None

    @property
    def job_cores(self) -> float | None:
        """The cores the job's processes use; where the whole tree was not measured, its
        training process and workers."""
        if self.job_cpu_pct is not None:
            return self.job_cpu_pct / 100.0
        workers = (self.workers or 0) * self.local_ranks
        parts = [self.main_cpu_pct or 0.0, workers * (self.worker_cpu_pct or 0.0)]
        if self.main_cpu_pct is None and self.worker_cpu_pct is None:
            return None
        return sum(parts) / 100.0

    @property
    def others_cores(self) -> float | None:
        """The cores other processes use: the machine's busy cores less the job's own."""
        job = self.job_cores
        if self.cpu_count is None or self.system_cpu_pct is None or job is None:
            return None
        return max(0.0, self.cpu_count * self.system_cpu_pct / 100.0 - job)

    @property
    def free_cores(self) -> float | None:
        """Cores the job could still use: idle machine-wide, and within its affinity and
        quota less what it already uses."""
        idle, room, job = self.idle_cores, self.room_cores, self.job_cores
        if idle is None:
            return None
        if room is None or job is None:
            return idle
        return max(0.0, min(idle, room - job))

    @property
    def room_per_rank(self) -> float | None:
        """The cores one rank's loader may count on: the job's room shared by its ranks."""
        room = self.room_cores
        return None if room is None else room / self.local_ranks

    @property
    def free_per_rank(self) -> float | None:
        """The free cores one rank's loader may take: the free cores shared by its ranks."""
        free = self.free_cores
        return None if free is None else free / self.local_ranks

    @property
    def uses_gpu(self) -> bool:
        """The job runs on a GPU: the hook says so, or (no hook facts) NVML sees one."""
        if self.model.cuda is not None:
            return self.model.cuda
        return self.gpu_name is not None


@dataclass(frozen=True)
class ProcTick:
    """What the advisor keeps of one process sample: CPU % of one core, and the machine's."""

    t: float
    workers: tuple[float, ...]
    main: float | None
    system: float | None  # % of all cores busy
    job: float | None = None  # every process of the job together, % of one core
    usable_cores: float | None = None  # the cores the job may use (affinity, cgroup quota)
    worker_waits: tuple[float, ...] = ()  # each worker's run-queue wait, % of one core
    main_wait: float | None = None  # the training processes' run-queue wait, as ``main``
    loaders: int = 0  # the training processes ("main" roles), each with its own loader

    @classmethod
    def of(
        cls,
        t: float,
        processes: Sequence[ProcSample],
        system: float | None,
        usable_cores: float | None,
    ) -> ProcTick:
        """What is kept of one process sample, taken at ``t``."""
        workers = [p for p in processes if p.role == "worker"]
        mains = [p for p in processes if p.role == "main"]
        main_cpu = [p.cpu_pct for p in mains if p.cpu_pct is not None]
        return cls(
            t,
            tuple(p.cpu_pct for p in workers if p.cpu_pct is not None),
            sum(main_cpu) if main_cpu else None,
            system,
            job=job_cpu(processes),
            usable_cores=usable_cores,
            worker_waits=tuple(p.run_wait_pct for p in workers if p.run_wait_pct is not None),
            main_wait=_sum_or_none(p.run_wait_pct for p in mains),
            loaders=len(mains),
        )


def job_cpu(processes: Sequence[ProcSample]) -> float | None:
    """The CPU of every process of the job's tree (main, workers, ranks, launcher, children),
    % of one core; None before any process was measured."""
    known = [p.cpu_pct for p in processes if p.cpu_pct is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class CpuRoom:
    """The job's own CPU and the room it has, over a window (means of process samples)."""

    job_cpu_pct: float | None  # the job's processes together, % of one core
    usable_cores: float | None  # affinity and cgroup quota; None: unknown


def cpu_room(proc_ticks: Sequence[ProcTick]) -> CpuRoom:
    return CpuRoom(
        _mean(tick.job for tick in proc_ticks), _mean(tick.usable_cores for tick in proc_ticks)
    )


def mean_worker_cpu(
    proc_ticks: Sequence[ProcTick],
) -> tuple[int | None, float | None, float | None, float | None]:
    """(workers of the whole node, mean CPU per worker, mean main CPU, mean system CPU) over
    process samples: the CPU figures (psutil). The advisor's worker count is one loader's
    (``loader_workers``)."""
    if not proc_ticks:
        return None, None, None, None
    per_worker = [cpu for tick in proc_ticks for cpu in tick.workers]
    workers = round(sum(len(tick.workers) for tick in proc_ticks) / len(proc_ticks))
    return (
        workers,
        sum(per_worker) / len(per_worker) if per_worker else None,
        _mean(tick.main for tick in proc_ticks),
        _mean(tick.system for tick in proc_ticks),
    )


def mean_worker_wait(proc_ticks: Sequence[ProcTick]) -> float | None:
    """Each worker's mean run-queue wait over process samples, % of one core."""
    return _mean(wait for tick in proc_ticks for wait in tick.worker_waits)


def mean_main_wait(proc_ticks: Sequence[ProcTick]) -> float | None:
    """The training processes' mean run-queue wait over process samples, % of one core."""
    return _mean(tick.main_wait for tick in proc_ticks)


def local_ranks(proc_ticks: Sequence[ProcTick]) -> int:
    """The training processes on this node over process samples (at least one)."""
    counts = [tick.loaders for tick in proc_ticks if tick.loaders]
    return max(1, round(sum(counts) / len(counts))) if counts else 1


def loader_workers(num_workers: int | None, node_workers: int | None, ranks: int) -> int | None:
    """One loader's workers: what the primary rank's hook says its DataLoader has
    (``num_workers``), else the node's worker processes shared by its ranks. Two ranks of 4
    workers each read 4, not 8 (issue 37: the sum told a loader to go to 12)."""
    if num_workers is not None and num_workers >= 0:
        return num_workers
    return None if node_workers is None else round(node_workers / max(1, ranks))


def mean_pcie_rx(ticks: Sequence[tuple[GpuSample, ...]]) -> float | None:
    return _mean(g.pcie_rx_mibps for tick in ticks for g in tick)


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
