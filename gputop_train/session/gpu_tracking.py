"""The session's GPU part (issue 47): every GPU's NVML ticks, the job's apart, and which GPUs
are the job's, chosen again at each tick (session/job_gpus.py says how). ``Session`` holds one
and calls it under its own lock; nothing here locks."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from .. import events
from ..samples import GpuSample
from . import job_gpus
from .job_gpus import JobGpus

# GPU samples at 2 Hz: 5 h.
MAX_GPU_TICKS = 36_000

Tick = tuple[GpuSample, ...]


class GpuTracking:
    """Every GPU's ticks (``every``), the job's GPUs' alone (``job``: every figure of the job
    reads these), and the choice of the job's GPUs (``chosen``) with what it is made from:
    the GPUs NVML has seen each PID on, each hooked PID's device UUID, CUDA_VISIBLE_DEVICES."""

    def __init__(self) -> None:
        self.every: deque[Tick] = deque(maxlen=MAX_GPU_TICKS)
        self.job: deque[Tick] = deque(maxlen=MAX_GPU_TICKS)
        self.chosen: JobGpus = job_gpus.select((), {}, (), {}, None)
        self.names: tuple[str | None, ...] = ()
        self.uuids: tuple[str | None, ...] = ()
        self.pci_bus_ids: tuple[str | None, ...] = ()
        self.nvml_error: str | None = None
        self._visible_devices: str | None = None
        self._device_uuids: dict[int, str] = {}  # per hooked PID, its device's UUID
        self._gpus_by_pid: dict[int, set[int]] = {}  # the GPUs NVML saw each PID on, so far

    def found(self, item: events.GpusFound) -> None:
        """The GPUs NVML found, who each is, or why it reads none."""
        self.names = tuple(item.names)
        self.uuids, self.pci_bus_ids = tuple(item.uuids), tuple(item.pci_bus_ids)
        self.nvml_error = item.error
        self._visible_devices = item.visible_devices

    def device_reported(self, pid: int, uuid: str) -> None:
        """A hooked process's device, by UUID (its ``model`` fact)."""
        self._device_uuids[pid] = uuid

    def sampled(self, tick: Tick, job_pids: Iterable[int], ranks: Mapping[int, int | None]) -> bool:
        """One NVML tick of every GPU; True where the job's GPUs changed with it: the job's
        ticks were then taken again from every GPU's, and what was built from them (charts,
        phase rows) must be built anew."""
        self.every.append(tick)
        for gpu in tick:
            for proc in gpu.processes:
                self._gpus_by_pid.setdefault(proc.pid, set()).add(gpu.index)
        count = len(tick)
        uuids = self.uuids[:count] + (None,) * (count - len(self.uuids[:count]))
        chosen = job_gpus.select(
            uuids,
            self._gpus_by_pid,
            job_pids,
            self._device_uuids,
            self._visible_devices,
            ranks,
            processes_listed=any(g.processes_listed for g in tick) or not tick,
            lost={g.index for g in tick if g.error is not None},
        )
        changed = chosen.indices != self.chosen.indices
        self.chosen = chosen
        if changed:
            self.job.clear()
            self.job.extend(t for old in self.every if (t := job_gpus.only(old, chosen)))
            return True
        if job_tick := job_gpus.only(tick, chosen):
            self.job.append(job_tick)
        return False

    def rank_gpus(self) -> dict[int, set[int]]:
        """The GPUs each process is on: the one its hook names, else those NVML lists it on."""
        named = {
            pid: {index}
            for pid, uuid in self._device_uuids.items()
            if (index := job_gpus.index_of_uuid(self.chosen.uuids, uuid)) is not None
        }
        return {**self._gpus_by_pid, **named}
