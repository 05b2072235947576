"""Every metric family the Prometheus endpoint serves, declared once: a row per family in
``RANK_FAMILIES`` (a series per rank), ``GPU_FAMILIES`` (a series per GPU of the node) and
``JOB_FAMILIES`` (the job's own). The collector (prometheus.py) yields every row of each
table, so a family cannot be declared and never served; adding one is one row here and its
line in docs/prometheus.md (docs/architecture.md, "Add a metric").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Generic, Literal, TypeVar

from .. import wire
from ..advise.stragglers import input_ms
from ..samples import GpuSample
from ..session.breakdown import activations, cache
from ..session.job_gpus import GpuFigures, GpuUser
from ..session.model import Snapshot
from ..session.stats import RankStats
from ..views import View

# A rank's and a GPU's own labels, after the job's. ``UUID`` and ``pci_bus_id`` as
# dcgm-exporter names them: ``on (UUID)`` joins its series to ours (docs/prometheus.md).
# A rank's ``gpu`` and ``UUID`` are those of the GPU it runs on (empty where it holds none,
# or several): ``on (UUID)`` joins dcgm-exporter's clocks and throttling to a rank's series.
RANK_LABELS = ("rank", "local_rank", "pid", "gpu", "UUID")
GPU_LABELS = ("gpu", "name", "UUID", "pci_bus_id")

Kind = Literal["gauge", "counter"]
Series = tuple[tuple[str, ...], float | None]  # a series' own label values, and its value
S = TypeVar("S")  # what a row reads: a rank's RankStats, or the job's View


@dataclass(frozen=True)
class Family(Generic[S]):
    """One series per subject (each rank, or the job): its name (after the prefix), its help,
    and its value, None for N/A (no sample, never a 0)."""

    name: str
    documentation: str
    value: Callable[[S], float | None]
    kind: Kind = "gauge"

    @property
    def labels(self) -> tuple[str, ...]:
        """Labels of its own, after the subject's: none."""
        return ()

    def series(self, subject: S) -> Iterator[Series]:
        yield (), self.value(subject)


@dataclass(frozen=True)
class LabelledFamily(Generic[S]):
    """Several series per subject, told apart by labels of its own (a step's parts, a
    finding): ``values`` gives each series' label values, in the order of ``labels``, and
    its value (None: no sample)."""

    name: str
    documentation: str
    labels: tuple[str, ...]
    values: Callable[[S], Iterable[Series]]
    kind: Kind = "gauge"

    def series(self, subject: S) -> Iterable[Series]:
        return self.values(subject)


GpuValue = Callable[[GpuSample, GpuFigures | None], float | None]


@dataclass(frozen=True)
class GpuFamily:
    """One per-GPU gauge: its name (after PREFIX), its help, and its value from the GPU's
    latest NVML sample and its figures over the window (session/job_gpus.py; None before
    the first window). A figure reads the window's (``_figure``), as the screen does. A
    value of None is no sample: N/A is never a 0."""

    name: str
    documentation: str
    value: GpuValue


def _parts(rank: RankStats) -> Iterator[Series]:
    parts = rank.steps.parts
    if parts is not None:
        for name, share in parts.pct.items():
            yield (name, parts.clock), ratio(share)


# Every per-rank family, in the order served.
RANK_FAMILIES: tuple[Family[RankStats] | LabelledFamily[RankStats], ...] = (
    Family(
        "step_seconds", "median step time over the window", lambda r: seconds(r.steps.step_ms_p50)
    ),
    Family("step_p95_seconds", "95th percentile step time", lambda r: seconds(r.steps.step_ms_p95)),
    Family(
        "data_wait_ratio",
        "share of step time waiting on data",
        lambda r: ratio(r.steps.data_wait_pct),
    ),
    Family(
        "gpu_time_ratio", "share of step time the GPU worked", lambda r: ratio(r.steps.gpu_time_pct)
    ),
    Family("samples_per_second", "samples/s over the window", lambda r: r.steps.samples_per_s),
    Family(
        "comm_wait_seconds",
        "median step's wait in collectives (all-reduce, barrier...) over the window",
        lambda r: None if r.comm is None else seconds(r.comm.wait_ms_p50),
    ),
    Family(
        "comm_wait_ratio",
        "share of step time waiting in collectives",
        lambda r: None if r.comm is None else ratio(r.comm.wait_pct),
    ),
    Family("tokens_per_second", "tokens/s over the window", lambda r: r.steps.tokens_per_s),
    Family(
        "input_wait_seconds",
        "time a step spends before its forward on its input: DataLoader wait or a "
        "loader-less loop's host gap (the straggler's input cause; docs/ranks.md)",
        lambda r: seconds(input_ms(r)),
    ),
    LabelledFamily(
        "step_part_ratio",
        "share of the step in each part (docs/steps.md); clock gpu or host",
        ("part", "clock"),
        _parts,
    ),
    Family("steps", "optimizer steps taken", lambda r: r.total_steps, kind="counter"),
    Family("samples", "samples consumed", lambda r: r.total_samples, kind="counter"),
)


def _job_gpu(gpu: GpuSample, figures: GpuFigures | None) -> float | None:
    return None if figures is None else float(figures.job)


def _others(figures: GpuFigures | None) -> tuple[GpuUser, ...]:
    return () if figures is None else figures.others


def _figure(name: str, scale: float = 1.0) -> GpuValue:
    """A GPU's figure of ``gpu_table.GPU_FIELDS`` over the live window, as the screen and the
    JSON show it (one window per figure), times ``scale`` into the metric's unit."""

    def value(_: GpuSample, figures: GpuFigures | None) -> float | None:
        found = None if figures is None else getattr(figures, name)
        return None if found is None else found * scale

    return value


PER_PCT, HZ_PER_MHZ = 0.01, 1e6  # a % as a ratio; MHz as Hz


# Every per-GPU family, in the order served (the clock-event reasons, a series per reason
# NVML knows, follow them: prometheus.py). The figures are each GPU's over the live window.
GPU_FAMILIES: tuple[GpuFamily, ...] = (
    GpuFamily("gpu_utilization_ratio", "NVML utilization", _figure("util_pct", PER_PCT)),
    GpuFamily("gpu_sm_active_ratio", "GPM SM activity", _figure("sm_active_pct", PER_PCT)),
    GpuFamily(
        "gpu_tensor_active_ratio", "GPM tensor-core activity", _figure("tensor_active_pct", PER_PCT)
    ),
    GpuFamily("gpu_memory_used_bytes", "GPU memory used (NVML)", _figure("mem_used_bytes")),
    GpuFamily("gpu_memory_total_bytes", "GPU memory (NVML)", _figure("mem_total_bytes")),
    GpuFamily("gpu_power_watts", "GPU power draw (NVML)", _figure("power_w")),
    GpuFamily("gpu_sm_clock_hertz", "SM clock (NVML)", _figure("sm_clock_mhz", HZ_PER_MHZ)),
    GpuFamily(
        "gpu_sm_clock_max_hertz",
        "the SM clock's ceiling (NVML)",
        _figure("sm_clock_max_mhz", HZ_PER_MHZ),
    ),
    GpuFamily(
        "gpu_job",
        "1 for a GPU of the job (NVML's processes, the hook's device), 0 for the node's others",
        _job_gpu,
    ),
    GpuFamily(
        "gpu_other_processes",
        "processes on the GPU that are not the job's (NVML)",
        lambda g, f: None if f is None else float(len(f.others)),
    ),
    GpuFamily(
        "gpu_other_memory_bytes",
        "GPU memory held by processes that are not the job's (NVML)",
        lambda g, f: None if not _others(f) else f.others_mem_bytes,  # type: ignore[union-attr]
    ),
    GpuFamily(
        "gpu_other_sm_ratio",
        "SM share of processes that are not the job's, window mean (NVML per process)",
        lambda g, f: None if not _others(f) else ratio(f.others_sm_pct),  # type: ignore[union-attr]
    ),
)

# The memory audit's series, by their ``kind`` label.
AUDIT_KINDS: dict[str, Callable[[wire.MemoryAudit], int | None]] = {
    "params": attrgetter("params_bytes"),
    "grads": attrgetter("grads_bytes"),
    "optimizer": attrgetter("optimizer_bytes"),
    "activations": activations,
    "cache": cache,
}


def _memory_audit(view: View) -> Iterator[Series]:
    audit = view.snap.memory
    if audit is not None:
        for kind, bytes_of in AUDIT_KINDS.items():
            yield (kind,), bytes_of(audit)


def _findings(view: View) -> Iterator[Series]:
    for index, found in enumerate(view.findings):
        # One series per rank a finding names (a stall may name several; never rank="").
        for rank in found.ranks or (found.rank,):
            yield (found.id, "1" if index == 0 else "0", label(rank)), 1.0


def _connected(view: View) -> Iterator[Series]:
    """Each hooked process, with a rank's labels: 1 while its hook is connected."""
    on_gpu = rank_gpus(view.snap)
    for process in view.snap.hooked:
        who = rank_labels(process.rank, process.local_rank, process.pid, on_gpu)
        yield who, 1.0 if process.connected else 0.0


# Every family of the job as a whole, in the order served.
JOB_FAMILIES: tuple[Family[View] | LabelledFamily[View], ...] = (
    Family("job_running", "1 while the job runs", lambda v: 1.0 if v.snap.job.running else 0.0),
    Family("phase", "the phase now running (each knob change opens one)", lambda v: v.snap.phase),
    Family(
        "job_samples_per_second", "samples/s of all ranks", lambda v: v.snap.steps.samples_per_s
    ),
    Family("job_tokens_per_second", "tokens/s of all ranks", lambda v: v.snap.steps.tokens_per_s),
    LabelledFamily(
        "gpu_memory_audit_bytes",
        "the memory audit: params, grads, optimizer, activations, cache (docs/steps.md)",
        ("kind",),
        _memory_audit,
    ),
    Family(
        "alloc_retries",
        "CUDA caching-allocator retries so far",
        lambda v: v.snap.memory.alloc_retries if v.snap.memory else None,
    ),
    Family("mfu_ratio", "achieved FLOP/s over the GPU's dense peak", lambda v: ratio(v.mfu_pct)),
    Family(
        "syncs_per_step",
        "host-device syncs in a scanned step",
        lambda v: v.snap.observation.syncs_per_step if v.snap.observation else None,
    ),
    LabelledFamily(
        "finding",
        "1 for each finding in force; headline=1 marks the first; rank: the rank it names",
        ("finding", "headline", "rank"),
        _findings,
    ),
    Family(
        "job_exit_code",
        "the job's exit status, once it ended",
        lambda v: None if v.snap.job.running else v.snap.job.exit_code,
    ),
    Family(
        "job_stopped",
        "1 once the job ended by a stop someone asked for (Ctrl+C, SIGTERM; torchrun exits 1"
        " then), 0 once it ended of itself; a stop is not a crash",
        lambda v: None if v.snap.job.running else (1.0 if v.snap.job.stopped_by else 0.0),
    ),
    # A process's, not the job's figure, but over the hooked processes (a rank that is gone
    # has no RankStats to be a row of RANK_FAMILIES): a rank's labels as its own.
    LabelledFamily(
        "rank_connected",
        "1 while the rank's hook is connected; 0 once it is gone",
        RANK_LABELS,
        _connected,
    ),
)


def rank_gpus(snap: Snapshot) -> dict[int, tuple[str, str]]:
    """Each rank's GPU as (NVML index, UUID) labels, by PID: the one GPU NVML has seen it hold
    memory on (RankStats.gpus), its UUID from NVML. A rank on several GPUs, or none yet, has
    none (empty labels)."""
    return {
        rank.who.pid: (str(rank.gpus[0]), at(snap.gpu_uuids, rank.gpus[0]))
        for rank in snap.ranks
        if len(rank.gpus) == 1
    }


def rank_labels(
    rank: int | None, local_rank: int | None, pid: int, on_gpu: dict[int, tuple[str, str]]
) -> tuple[str, ...]:
    """A process's values of ``RANK_LABELS``; ``on_gpu``: rank_gpus of the snapshot."""
    return (label(rank), label(local_rank), str(pid), *on_gpu.get(pid, ("", "")))


def at(values: Sequence[str | None], index: int) -> str:
    """The label of GPU ``index``, or "" (no label) where NVML did not say."""
    return (values[index] or "") if 0 <= index < len(values) else ""


def label(value: int | None) -> str:
    return "" if value is None else str(value)


def hertz(mhz: float | None) -> float | None:
    return None if mhz is None else mhz * 1e6


def seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100.0
