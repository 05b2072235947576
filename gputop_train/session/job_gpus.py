"""Which GPUs are the job's, and each GPU's own figures over a window (issue 37).

A node has 1-8 GPUs and a job uses some of them: a figure of the job (utilization, activity,
memory headroom, power, MFU's peak) is over its GPUs only, never a mean or a sum over the
node. The job's GPUs are found two ways, which agree where both work: NVML's compute
processes matched to the job's process tree, and each rank's device as its hook reports it
by UUID (a container's PIDs are not NVML's: there the hook's UUID alone tells). Before the
job has touched a GPU they are assumed, and the reason is said: ``CUDA_VISIBLE_DEVICES`` as
the monitor runs under it (a launched job inherits it), else every GPU.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..samples import GpuSample
from . import gpu_table


@dataclass(frozen=True)
class JobGpus:
    """The job's GPUs (NVML index), whether they are only assumed yet, and why these."""

    indices: tuple[int, ...]
    assumed: bool
    reason: str
    job_pids: frozenset[int] = frozenset()  # the job's processes (its tree, its hooks)
    ranks: Mapping[int, int | None] = field(default_factory=dict)  # pid -> rank (hooked)
    uuids: tuple[str | None, ...] = ()  # every GPU's UUID, by index
    # False where NVML gives no process list (nvmlDeviceGetComputeRunningProcesses N/A):
    # only a hook's device can then tell the job's GPUs, and no other user is seen.
    processes_listed: bool = True

    def holds(self, index: int) -> bool:
        return index in self.indices


def _bare(uuid: str) -> str:
    """A UUID as torch and NVML both spell it once the prefix is off: NVML says
    "GPU-0b42...", torch's device properties "0b42..."."""
    return uuid.strip().lower().removeprefix("gpu-")


def index_of_uuid(uuids: Sequence[str | None], uuid: str) -> int | None:
    """The NVML index of a GPU named by UUID (full, or a prefix as CUDA_VISIBLE_DEVICES
    allows); None where no GPU (or more than one) matches."""
    wanted = _bare(uuid)
    if not wanted:
        return None
    found = [i for i, known in enumerate(uuids) if known and _bare(known).startswith(wanted)]
    return found[0] if len(found) == 1 else None


def visible_indices(visible: str, uuids: Sequence[str | None]) -> tuple[int, ...] | None:
    """The NVML indices CUDA_VISIBLE_DEVICES names (ordinals or UUIDs); None where it names
    something else (MIG instances): no assumption is made from it."""
    indices: list[int] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            continue
        if entry.lstrip("-").isdigit():
            number = int(entry)
            if number < 0:
                break  # CUDA stops at the first invalid ordinal
            if number < len(uuids) and number not in indices:
                indices.append(number)
            continue
        index = index_of_uuid(uuids, entry)
        if index is None:
            return None
        if index not in indices:
            indices.append(index)
    return tuple(indices)


def select(
    uuids: Sequence[str | None],
    pids_on_gpus: Mapping[int, Iterable[int]],
    job_pids: Iterable[int],
    device_uuids: Mapping[int, str],
    visible: str | None,
    ranks: Mapping[int, int | None] | None = None,
    processes_listed: bool = True,
    lost: Collection[int] = (),
) -> JobGpus:
    """The job's GPUs among ``len(uuids)``: those NVML has seen a process of the job on
    (``pids_on_gpus``: pid -> GPU indices) and those its hooks report (``device_uuids``: pid
    -> UUID); else assumed from ``visible`` (CUDA_VISIBLE_DEVICES), else every GPU that NVML
    still reads (``lost``: those it cannot). Where NVML lists no process
    (``processes_listed`` false) the reason says that only a hook's device can tell."""
    pids = frozenset(job_pids) | frozenset(device_uuids)
    count = len(uuids)
    reported = {pid: index_of_uuid(uuids, uuid) for pid, uuid in device_uuids.items()}
    seen: set[int] = set()
    for pid in pids:
        if reported.get(pid) is not None:
            # Its hook names its device: a stray context elsewhere (a rank's ~500 MB on GPU 0
            # before its set_device) does not make that GPU the job's.
            continue
        seen.update(i for i in pids_on_gpus.get(pid, ()) if 0 <= i < count)
    named = {i for i in reported.values() if i is not None}
    base = JobGpus((), True, "", pids, dict(ranks or {}), tuple(uuids), processes_listed)
    if seen or named:
        ways = []
        if named:
            ways.append("the hook reports the device by UUID")
        if seen:
            ways.append("NVML lists the job's processes on it")
        if not processes_listed:
            ways.append(f"{NO_PROCESS_LIST}: other users' processes are not seen")
        chosen = tuple(sorted(seen | named))
        return replace(base, indices=chosen, assumed=False, reason="; ".join(ways))
    until = "until the job touches one" if processes_listed else f"({NO_PROCESS_LIST})"
    if visible is not None:
        listed = visible_indices(visible, uuids)
        if listed == ():
            return replace(base, reason=f"CUDA_VISIBLE_DEVICES={visible!r} shows the job no GPU")
        if listed:
            reason = f"assumed from CUDA_VISIBLE_DEVICES={visible} {until}"
            return replace(base, indices=listed, reason=reason)
    answering = tuple(i for i in range(count) if i not in lost)
    if not count:
        return replace(base, reason="NVML lists no GPU")
    if not answering:
        return replace(base, reason=f"NVML reads none of the {count} GPUs")
    every = (
        f"every GPU ({count})"
        if len(answering) == count
        else (f"every GPU NVML reads ({len(answering)} of {count})")
    )
    return replace(base, indices=answering, reason=f"assumed: {every} {until}")


# Why the job's GPUs are assumed where NVML gives no process list (an old driver, a vGPU, a
# container without the PID's namespace): a hooked job's device UUID is then the only tell.
NO_PROCESS_LIST = "NVML here lists no GPU's processes, so only a hooked rank's device tells"


def only(tick: tuple[GpuSample, ...], job: JobGpus) -> tuple[GpuSample, ...]:
    """The job's GPUs of one NVML tick."""
    return tuple(gpu for gpu in tick if job.holds(gpu.index))


@dataclass(frozen=True)
class GpuUser:
    """A process on a GPU that is not the job's: whose, and what it takes."""

    pid: int
    user: str | None
    command: str | None
    mem_bytes: int | None
    sm_pct: float | None  # NVML per-process SM %, mean over the window


@dataclass(frozen=True)
class GpuFigures:
    """One GPU over a window: who it is, the job's share of it, the others on it, and a
    figure per row of ``gpu_table.GPU_FIELDS`` (its window there: a mean, the latest, the
    union); None is N/A."""

    index: int
    uuid: str | None
    name: str | None
    job: bool  # one of the job's GPUs
    pids: tuple[int, ...]  # the job's processes on it
    ranks: tuple[int, ...]  # their ranks, where known
    job_mem_bytes: int | None  # the job's processes' share of mem_used_bytes (NVML)
    others: tuple[GpuUser, ...]  # the processes on it that are not the job's
    # The figures, a field per row of gpu_table.GPU_FIELDS, in its order.
    util_pct: float | None = None
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    mem_util_pct: float | None = None
    sm_occupancy_pct: float | None = None
    dram_bw_pct: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temp_c: float | None = None
    throttle: tuple[str, ...] | None = None  # the reasons in force at any sample of the window
    pcie_rx_mibps: float | None = None
    pcie_tx_mibps: float | None = None
    error: str | None = None  # why NVML reads nothing of it now ("GPU is lost")

    @property
    def mem_free_pct(self) -> float | None:
        if not self.mem_total_bytes or self.mem_used_bytes is None:
            return None
        return 100.0 * (self.mem_total_bytes - self.mem_used_bytes) / self.mem_total_bytes

    @property
    def others_sm_pct(self) -> float | None:
        """The SM share the other processes take (NVML per process); None: not read."""
        known = [u.sm_pct for u in self.others if u.sm_pct is not None]
        return sum(known) if known else None

    @property
    def others_mem_bytes(self) -> int | None:
        known = [u.mem_bytes for u in self.others if u.mem_bytes is not None]
        return sum(known) if known else None


def gpu_figures(
    ticks: Sequence[tuple[GpuSample, ...]],
    job: JobGpus,
    over_window: gpu_table.OverWindow | None = None,
) -> tuple[GpuFigures, ...]:
    """Each GPU's figures over ``ticks``, in index order (``over_window``: the session's kept
    windows, session/gpu_windows.py)."""
    window = over_window or gpu_table.over_window
    return tuple(
        _figures(index, samples, job, window)
        for index, samples in sorted(gpu_table.by_gpu(ticks).items())
    )


def _figures(
    index: int, samples: list[GpuSample], job: JobGpus, over_window: gpu_table.OverWindow
) -> GpuFigures:
    latest = samples[-1]
    mine = [p for p in latest.processes if p.pid in job.job_pids]
    sm_by_pid: dict[int, list[float]] = {}
    for sample in samples:
        for proc in sample.processes:
            if proc.sm_pct is not None:
                sm_by_pid.setdefault(proc.pid, []).append(proc.sm_pct)
    others = tuple(
        GpuUser(p.pid, p.user, p.command, p.mem_bytes, gpu_table.mean(sm_by_pid.get(p.pid, ())))
        for p in latest.processes
        if p.pid not in job.job_pids
    )
    pids = tuple(sorted({p.pid for p in mine}))
    job_mem = [p.mem_bytes for p in mine if p.mem_bytes is not None]
    return GpuFigures(
        index=index,
        uuid=job.uuids[index] if index < len(job.uuids) else None,
        name=latest.name,
        job=job.holds(index),
        pids=pids,
        ranks=tuple(sorted(r for pid in pids if (r := job.ranks.get(pid)) is not None)),
        job_mem_bytes=sum(job_mem) if job_mem else None,
        others=others,
        **over_window(samples),
    )
