"""Scripted stand-ins for pynvml and psutil, so every layer runs and is tested with no GPU.

They implement just the calls the samplers make. Tests (and the TUI snapshot suite) set the
attributes of ``FakeGpu`` / ``FakeProcess`` between samples to script a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class FakeNvmlError(Exception):
    """Raised like pynvml.NVMLError for calls a fake GPU does not support; ``value`` is
    NVML's return code, as pynvml's errors carry it."""

    value: int | None = None


class FakeFunctionNotFound(FakeNvmlError):
    """pynvml's NVMLError_FunctionNotFound: the binding is there, the driver lacks it."""

    value = 13


class FakeGpuIsLost(FakeNvmlError):
    """pynvml's NVMLError_GpuIsLost: the GPU fell off the bus."""

    value = 15

    def __str__(self) -> str:
        return "GPU is lost"


class FakeUnknownError(FakeNvmlError):
    """pynvml's NVMLError_Unknown."""

    value = 999

    def __str__(self) -> str:
        return "Unknown Error"


# How a broken fake GPU fails: every call on it, its handle's included, raises this.
BROKEN = {"lost": FakeGpuIsLost, "unknown": FakeUnknownError}


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str | None = None  # None: one made from the index
    util: int = 0
    mem_util: int = 0
    mem_used: int = 0
    mem_total: int = 80 * 2**30
    mem_reserved: int = 0  # the driver's own: in v1's used, not in v2's (nvmlMemory_v2)
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    energy_mj: int = 0
    temp: int = 30
    sm_clock: int = 1980
    sm_clock_max: int = 1980
    mem_clock: int = 2619
    throttle_bits: int = 0
    pcie_rx_kbps: int = 0
    pcie_tx_kbps: int = 0
    # (pid, used bytes, SM %) of the compute processes on this GPU.
    processes: list[tuple[int, int, int]] = field(default_factory=list)
    # GPM metric id -> value; None means the GPU has no GPM (pre-Hopper).
    gpm: dict[int, float] | None = None
    unsupported: set[str] = field(default_factory=set)
    # "lost" (fallen off the bus) or "unknown": every call on the GPU raises that error
    # (set before ``open``: its handle cannot be had; after: it fails mid-run). None: works.
    broken: str | None = None


class _GpmRequest:
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(32)]


class FakeNvml:
    """A module-like object with pynvml's function names, backed by ``FakeGpu`` objects."""

    NVML_GPM_METRICS_GET_VERSION = 1
    NVMLError = FakeNvmlError
    c_nvmlGpmMetricsGet_t = _GpmRequest

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        init_error: str | None = None,
        absent: frozenset[str] = frozenset(),
        not_found: frozenset[str] = frozenset(),
    ) -> None:
        """``absent``: functions this nvidia-ml-py lacks (no attribute); ``not_found``:
        functions the driver lacks (they raise NVMLError_FunctionNotFound when called)."""
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.absent = absent
        self.not_found = not_found
        self.calls: dict[str, int] = {}
        self.owners: dict[int, tuple[str | None, str | None]] = {}  # pid -> (user, command)

    def owner(self, pid: int) -> tuple[str | None, str | None]:
        """Whose a process is, for ``NvmlSampler(owner=...)``: from ``owners``, else N/A."""
        return self.owners.get(pid, (None, None))

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "absent"):
            raise AttributeError(name)
        if name.startswith("nvml") and name in object.__getattribute__(self, "not_found"):
            return _function_not_found(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        """Any other NVML name is answered as pynvml does for a function the driver lacks."""
        if name.startswith("nvml") and name not in self.absent:
            return _function_not_found(name)
        raise AttributeError(name)

    def _gpu(self, handle: int, call: str) -> FakeGpu:
        self.calls[call] = self.calls.get(call, 0) + 1
        gpu = self.gpus[handle]
        if gpu.broken is not None:
            raise BROKEN[gpu.broken]()
        if call in gpu.unsupported:
            raise FakeNvmlError(f"{call}: Not Supported")
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNvmlError(self.init_error)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._gpu(index, "handle")
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "name").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "uuid").uuid or f"GPU-00000000-0000-0000-0000-{h:012d}"

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        self._gpu(h, "pci")
        return SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0")

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        gpu = self._gpu(h, "utilization")
        return SimpleNamespace(gpu=gpu.util, memory=gpu.mem_util)

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> Any:
        """v1 counts the driver's reserved memory as used; v2 (``version``) does not, and a
        driver without it refuses (``"memory_v2"`` in the GPU's ``unsupported``)."""
        gpu = self._gpu(h, "memory_v2" if version else "memory")
        used = gpu.mem_used if version else gpu.mem_used + gpu.mem_reserved
        free = gpu.mem_total - gpu.mem_used - gpu.mem_reserved
        return SimpleNamespace(used=used, total=gpu.mem_total, free=free)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._gpu(h, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._gpu(h, "power_limit").power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return self._gpu(h, "energy").energy_mj

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._gpu(h, "temperature").temp

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        gpu = self._gpu(h, "clocks")
        return gpu.sm_clock if clock == 1 else gpu.mem_clock

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return self._gpu(h, "max_clocks").sm_clock_max

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._gpu(h, "throttle").throttle_bits

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:  # the older name
        return self._gpu(h, "throttle").throttle_bits

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        gpu = self._gpu(h, "pcie")
        return gpu.pcie_rx_kbps if counter == 1 else gpu.pcie_tx_kbps

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        gpu = self._gpu(h, "processes")
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem, _ in gpu.processes]

    def nvmlDeviceGetProcessUtilization(self, h: int, since: int) -> list[Any]:
        gpu = self._gpu(h, "process_utilization")
        return [
            SimpleNamespace(pid=pid, smUtil=sm, timeStamp=since + 1) for pid, _, sm in gpu.processes
        ]

    def nvmlGpmQueryDeviceSupport(self, h: int) -> Any:
        return SimpleNamespace(isSupportedDevice=int(self._gpu(h, "gpm").gpm is not None))

    def nvmlGpmSampleAlloc(self) -> Any:
        return SimpleNamespace(handle=None)

    def nvmlGpmSampleGet(self, h: int, sample: Any) -> Any:
        self._gpu(h, "gpm")
        sample.handle = h
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        pass

    def nvmlGpmMetricsGet(self, request: _GpmRequest) -> _GpmRequest:
        gpm = self.gpus[request.sample2.handle].gpm or {}
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            metric.value = gpm.get(metric.metricId, float("nan"))
        return request


class OldBindingNvml(FakeNvml):
    """An older nvidia-ml-py (pynvml 11.4.1, still pinned in many environments): its memory
    call takes no version argument (a TypeError if given one) and it has no
    ``nvmlMemory_v2``, so memory comes from v1, the driver's reserved memory counted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.absent = self.absent | {"nvmlMemory_v2"}

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # type: ignore[override]
        return super().nvmlDeviceGetMemoryInfo(h)


def _function_not_found(name: str) -> Any:
    def missing(*args: Any) -> Any:
        raise FakeFunctionNotFound(f"{name}: Function Not Found")

    return missing


# -- psutil ---------------------------------------------------------------------------------


class NoSuchProcess(Exception):
    pass


class AccessDenied(Exception):
    pass


class ZombieProcess(NoSuchProcess):
    pass


@dataclass
class FakeProcess:
    pid: int
    ppid: int
    name: str = "python"
    cpu: float = 0.0
    rss: int = 100 * 2**20
    read_bytes: int = 0
    write_bytes: int = 0
    status: str = "running"
    denied: bool = False


class _ProcessHandle:
    def __init__(self, table: FakePsutil, pid: int) -> None:
        self._table = table
        self.pid = pid

    def _spec(self) -> FakeProcess:
        spec = self._table.processes.get(self.pid)
        if spec is None:
            raise NoSuchProcess(self.pid)
        if spec.denied:
            raise AccessDenied(self.pid)
        return spec

    @contextlib.contextmanager
    def oneshot(self) -> Iterator[None]:
        yield

    def children(self, recursive: bool = False) -> list[_ProcessHandle]:
        self._spec()
        found, frontier = [], [self.pid]
        while frontier:
            parent = frontier.pop(0)
            kids = [p.pid for p in self._table.processes.values() if p.ppid == parent]
            found.extend(kids)
            if recursive:
                frontier.extend(kids)
        return [_ProcessHandle(self._table, pid) for pid in found]

    def name(self) -> str:
        return self._spec().name

    def cpu_percent(self, interval: Any = None) -> float:
        return self._spec().cpu

    def memory_info(self) -> Any:
        return SimpleNamespace(rss=self._spec().rss)

    def status(self) -> str:
        return self._spec().status

    def ppid(self) -> int:
        return self._spec().ppid

    def io_counters(self) -> Any:
        spec = self._spec()
        return SimpleNamespace(read_bytes=spec.read_bytes, write_bytes=spec.write_bytes)


class FakePsutil:
    """A module-like object with psutil's ``Process`` and exception names, over a table."""

    NoSuchProcess = NoSuchProcess
    AccessDenied = AccessDenied
    ZombieProcess = ZombieProcess

    def __init__(self, processes: list[FakeProcess], system_cpu_pct: float = 25.0) -> None:
        self.processes = {p.pid: p for p in processes}
        self.system_cpu_pct = system_cpu_pct  # what cpu_percent() says of the whole machine

    def cpu_percent(self, interval: Any = None) -> float:
        return self.system_cpu_pct

    def Process(self, pid: int) -> _ProcessHandle:
        if pid not in self.processes:
            raise NoSuchProcess(pid)
        return _ProcessHandle(self, pid)
