"""NVML sampler: per-GPU utilization, memory, power, clocks, PCIe, processes and GPM activity.

Every field may be N/A (None): a call that fails or is not supported never stops the
sampler. Fields are sampled in tiers by their CPU cost, measured on the reference H100 with
benchmarks/overhead/sampler_cost.py (docs/benchmarks.md): the whole fast tier ~0.17 ms, energy
~2.7 ms, per-process utilization ~1.9 ms, PCIe throughput ~0.7 ms of CPU (20 ms of wall time).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import events
from ..samples import GpuProcess, GpuSample
from .base import CHEAP, SamplerUnavailable, Sink

_log = logging.getLogger(__name__)

# Cheap fields every call (the sampler thread runs at 2 Hz); these every N seconds.
MEDIUM_PERIOD_S = 1.0  # power, temperature, clocks, throttle, GPU memory per process, GPM
# Energy, SM % per process (NVML refreshes it only every ~200 ms), PCIe throughput without
# GPM and the power limit: each costs milliseconds of CPU.
SLOW_PERIOD_S = 5.0
# GPM pairs closer than this came back 0 or NaN on the reference H100.
GPM_MIN_INTERVAL_S = 0.1

_THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "app_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}

_GPM_FIELDS = {
    "sm_active_pct": 2,  # NVML_GPM_METRIC_SM_UTIL
    "sm_occupancy_pct": 3,  # NVML_GPM_METRIC_SM_OCCUPANCY
    "tensor_active_pct": 5,  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    "dram_bw_pct": 10,  # NVML_GPM_METRIC_DRAM_BW_UTIL
    "pcie_tx_mibps": 20,  # NVML_GPM_METRIC_PCIE_TX_PER_SEC
    "pcie_rx_mibps": 21,  # NVML_GPM_METRIC_PCIE_RX_PER_SEC
}


class NvmlUnavailable(RuntimeError):
    """No NVML here (no driver, no GPU, or the library failed to load)."""


FAST, MEDIUM, SLOW = "fast", "medium", "slow"  # every sample; MEDIUM_PERIOD_S; SLOW_PERIOD_S


# NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus (every later call on it fails alike).
GPU_IS_LOST = 15


class GpuLost(Exception):
    """A GPU NVML can no longer reach: its row says why, the other GPUs are still read."""


class Nvml:
    """pynvml by function name (nvitop's ``nvmlQuery`` habit): a function this nvidia-ml-py or
    driver lacks, or any exception the binding's call raises (an ``NVMLError``; a
    ``TypeError`` of an older binding's signature, pynvml 11.4.1's memory call without a
    version; a ``UnicodeDecodeError`` of a name), is N/A for the figures it gives alone,
    logged once per function. A GPU fallen off the bus raises ``GpuLost`` instead: no figure
    of it can be read again. Our own code around the call (a conversion) still raises."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.unavailable: dict[str, str] = {}  # function -> why it read N/A (first time)

    def has(self, name: str) -> bool:
        return callable(getattr(self.module, name, None))

    def query(self, names: str | tuple[str, ...], *args: Any) -> Any:
        """The answer of the first of ``names`` (a function and its older names) that this
        module has and that answers; None where none does."""
        options = (names,) if isinstance(names, str) else names
        reason = "not in this nvidia-ml-py"
        for name in options:
            if not self.has(name):
                continue
            try:
                return getattr(self.module, name)(*args)
            except Exception as error:  # the binding's, whatever its kind (docstring)
                if is_lost(error):
                    raise GpuLost(reason_of(error)) from error
                reason = reason_of(error)
        self._once(options[0], reason)
        return None

    def _once(self, name: str, reason: str) -> None:
        if name not in self.unavailable:
            self.unavailable[name] = reason
            _log.info("NVML %s is N/A: %s", name, reason)


def is_lost(error: BaseException) -> bool:
    """NVMLError_GpuIsLost, by its code (a binding's class names vary)."""
    return getattr(error, "value", None) == GPU_IS_LOST


def reason_of(error: BaseException) -> str:
    """An NVML error as its row or note says it: NVML's own words ("GPU is lost", "Unknown
    Error"), else the exception's kind and text."""
    text = str(error)
    if getattr(error, "value", None) is not None and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _milli(value: Any) -> float:
    return value / 1000.0


def _kib_to_mib(value: Any) -> float:
    return value / 1024.0


def _same(value: Any) -> Any:
    return value


def _throttle_names(bits: Any) -> tuple[str, ...]:
    return tuple(name for bit, name in _THROTTLE_BITS.items() if bits & bit and bit != 0x1)


@dataclass(frozen=True)
class NvmlField:
    """One ``GpuSample`` field: the NVML function that gives it (the first one present of a
    tuple: renamed functions), the arguments after the handle, its tier and the conversion to
    the field's unit. Fields of one function share one call per sample."""

    field: str
    function: str | tuple[str, ...]
    args: tuple[Any, ...] = ()
    tier: str = FAST
    transform: Callable[[Any], Any] = _same
    pick: str | None = None  # the attribute of the answer the field is
    without_gpm: bool = False  # read only where GPM does not give it (a slow call)
    # The arguments to ask with again where ``args`` are N/A (a newer struct an older driver
    # lacks); None: no second try.
    fallback_args: tuple[Any, ...] | None = None


# nvmlMemory_v2 (sizeof(nvmlMemory_v2_t) | 2 << 24): its ``used`` leaves out the driver's
# reserved memory, as nvidia-smi shows it; v1 counted it (615 MiB more on each H200 of a
# 2-GPU node, 2026-11-27, docs/gpus.md).
MEMORY_V2 = 0x02000028

FIELDS: tuple[NvmlField, ...] = (
    NvmlField("util_pct", "nvmlDeviceGetUtilizationRates", pick="gpu"),
    NvmlField("mem_util_pct", "nvmlDeviceGetUtilizationRates", pick="memory"),
    NvmlField(
        "mem_used_bytes", "nvmlDeviceGetMemoryInfo", (MEMORY_V2,), pick="used", fallback_args=()
    ),
    NvmlField(
        "mem_total_bytes", "nvmlDeviceGetMemoryInfo", (MEMORY_V2,), pick="total", fallback_args=()
    ),
    NvmlField("power_w", "nvmlDeviceGetPowerUsage", tier=MEDIUM, transform=_milli),
    NvmlField("temp_c", "nvmlDeviceGetTemperature", (0,), MEDIUM),  # 0: the GPU die
    NvmlField("sm_clock_mhz", "nvmlDeviceGetClockInfo", (1,), MEDIUM),  # NVML_CLOCK_SM
    NvmlField("mem_clock_mhz", "nvmlDeviceGetClockInfo", (2,), MEDIUM),  # NVML_CLOCK_MEM
    NvmlField(
        "throttle",
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        tier=MEDIUM,
        transform=_throttle_names,
    ),
    NvmlField("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", tier=SLOW, transform=_milli),
    NvmlField("energy_j", "nvmlDeviceGetTotalEnergyConsumption", tier=SLOW, transform=_milli),
    # The ceiling the SM clock is read against (a throttled GPU runs under it).
    NvmlField("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", (1,), SLOW),
    # PCIe rates: GPM gives them for free; else this slow call (RX_BYTES 1, TX_BYTES 0).
    NvmlField("pcie_rx_mibps", "nvmlDeviceGetPcieThroughput", (1,), SLOW, _kib_to_mib, None, True),
    NvmlField("pcie_tx_mibps", "nvmlDeviceGetPcieThroughput", (0,), SLOW, _kib_to_mib, None, True),
)
# The functions behind the figures outside FIELDS: who each GPU is, its processes, GPM.
PROCESS_FUNCTIONS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetProcessUtilization")
GPM_FUNCTIONS = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmSampleFree",
)


class _Device:
    def __init__(self, index: int, handle: Any, error: str | None = None) -> None:
        self.index = index
        self.handle = handle
        # Why NVML reads nothing of this GPU ("GPU is lost"); None while it answers.
        self.error = error
        self.name: str | None = None
        # Who the GPU is, as dcgm-exporter labels it (UUID, pci_bus_id): read once.
        self.uuid: str | None = None
        self.pci_bus_id: str | None = None
        self.fields: dict[str, dict[str, Any]] = {MEDIUM: {}, SLOW: {}}
        self.gpm_supported = False
        self.gpm_previous: Any = None
        self.gpm_previous_t = 0.0
        self.process_util_ts = 0
        self.sm_by_pid: dict[int, float] = {}


class NvmlSampler:
    """Samples every visible GPU; construct with a fake module in tests (collect/fake.py).
    ``owner`` names a PID's user and command for the GPU's other processes (psutil)."""

    def __init__(
        self,
        nvml: Any = None,
        clock: Any = time.monotonic,
        wall_clock: Any = time.time,
        owner: Callable[[int], tuple[str | None, str | None]] | None = None,
    ) -> None:
        self._module = nvml
        self.nvml = Nvml(nvml)
        self._clock = clock
        self._wall_clock = wall_clock
        self._owner = owner or process_owner
        self._owners: dict[int, tuple[str | None, str | None]] = {}
        self._devices: list[_Device] = []
        self._next_medium = 0.0
        self._next_slow = 0.0
        self.driver: str | None = None

    def open(self) -> list[str | None]:
        """Initialise NVML; returns the GPU names. Raises NvmlUnavailable with the reason."""
        try:
            if self._module is None:
                import pynvml

                self._module = pynvml
                self.nvml = Nvml(pynvml)
            self._module.nvmlInit()
            count = self._module.nvmlDeviceGetCount()
        except Exception as error:
            raise NvmlUnavailable(_describe(error)) from error
        query = self.nvml.query
        self.driver = _text(query("nvmlSystemGetDriverVersion"))
        for index in range(count):
            self._devices.append(self._open_device(index))
        return [d.name for d in self._devices]

    def _open_device(self, index: int) -> _Device:
        """One GPU and who it is; a GPU NVML cannot open (fallen off the bus, an unknown
        error) is a device with its reason, and the others are opened still."""
        try:
            device = _Device(index, self._module.nvmlDeviceGetHandleByIndex(index))
        except Exception as error:  # the binding's, of one GPU (Nvml's docstring)
            _log.info("NVML GPU %d: %s", index, reason_of(error))  # its row says it
            return _Device(index, None, reason_of(error))
        query = self.nvml.query
        try:
            device.name = _text(query("nvmlDeviceGetName", device.handle))
            device.uuid = _text(query("nvmlDeviceGetUUID", device.handle))
            device.pci_bus_id = _text(_attr(query("nvmlDeviceGetPciInfo", device.handle), "busId"))
            device.gpm_supported = self._gpm_supported(device)
        except GpuLost as lost:
            device.error = str(lost)
        return device

    def identities(self) -> list[tuple[str | None, str | None]]:
        """Each GPU's UUID and PCI bus id (None: N/A), in index order, after ``open``."""
        return [(d.uuid, d.pci_bus_id) for d in self._devices]

    def close(self) -> None:
        for device in self._devices:
            self._free_gpm(device)
        self.nvml.query("nvmlShutdown")

    def _free_gpm(self, device: _Device) -> None:
        if device.gpm_previous is not None:
            self.nvml.query("nvmlGpmSampleFree", device.gpm_previous)
            device.gpm_previous = None

    def sample(self) -> tuple[GpuSample, ...]:
        now = self._clock()
        medium = now >= self._next_medium
        slow = now >= self._next_slow
        if medium:
            self._next_medium = now + MEDIUM_PERIOD_S
        if slow:
            self._next_slow = now + SLOW_PERIOD_S
        wall = self._wall_clock()
        return tuple(self._sample_device(d, wall, now, medium, slow) for d in self._devices)

    def _sample_device(
        self, device: _Device, wall: float, now: float, medium: bool, slow: bool
    ) -> GpuSample:
        """One GPU's figures; a GPU NVML has lost is a sample that says so, and is asked
        nothing more (a lost GPU's calls can take seconds each)."""
        if device.error is None:
            try:
                return self._read_device(device, wall, now, medium, slow)
            except GpuLost as lost:
                _log.info("NVML GPU %d: %s", device.index, lost)  # its row says it
                device.error = str(lost)
                self._free_gpm(device)
        why = device.error
        return GpuSample(device.index, wall, device.name, error=why, processes_listed=False)

    def _read_device(
        self, device: _Device, wall: float, now: float, medium: bool, slow: bool
    ) -> GpuSample:
        answers: dict[tuple[Any, ...], Any] = {}  # one call per function and arguments
        if slow:
            self._refresh_process_utilization(device)
        if medium:
            device.fields[MEDIUM] = self._tier(device, MEDIUM, answers)
            processes = self._processes(device)
            device.fields[MEDIUM]["processes"] = processes or ()
            device.fields[MEDIUM]["processes_listed"] = processes is not None
            if device.gpm_supported:
                device.fields[MEDIUM].update(self._gpm(device, now))
        if slow:  # after GPM: where GPM failed, PCIe comes from the slow call at once
            device.fields[SLOW] = self._tier(device, SLOW, answers)
        return GpuSample(
            index=device.index,
            t=wall,
            name=device.name,
            **device.fields[SLOW],
            **device.fields[MEDIUM],
            **self._tier(device, FAST, answers),
        )

    def _tier(
        self, device: _Device, tier: str, answers: dict[tuple[Any, ...], Any]
    ) -> dict[str, Any]:
        """The fields of one tier, from the table: N/A where the function is."""
        values: dict[str, Any] = {}
        for spec in FIELDS:
            if spec.tier != tier or (spec.without_gpm and device.gpm_supported):
                continue
            answer = self._answer(device, spec.function, spec.args, answers)
            if answer is None and spec.fallback_args is not None:
                answer = self._answer(device, spec.function, spec.fallback_args, answers)
            if spec.pick is not None:
                answer = _attr(answer, spec.pick)
            values[spec.field] = None if answer is None else spec.transform(answer)
        return values

    def _answer(
        self,
        device: _Device,
        function: str | tuple[str, ...],
        args: tuple[Any, ...],
        answers: dict[tuple[Any, ...], Any],
    ) -> Any:
        key = (function, *args)
        if key not in answers:
            answers[key] = self.nvml.query(function, device.handle, *args)
        return answers[key]

    def _refresh_process_utilization(self, device: _Device) -> None:
        """SM % per PID since the last call (NVML keeps a short history of samples)."""
        utilization = self.nvml.query(
            "nvmlDeviceGetProcessUtilization", device.handle, device.process_util_ts
        )
        sm_by_pid: dict[int, float] = {}
        for sample in utilization or []:
            sm_by_pid[sample.pid] = float(sample.smUtil)
            device.process_util_ts = max(device.process_util_ts, int(sample.timeStamp))
        device.sm_by_pid = sm_by_pid

    def _processes(self, device: _Device) -> tuple[GpuProcess, ...] | None:
        """The compute processes on the GPU; None where NVML gives no list (N/A, not none)."""
        running = self.nvml.query("nvmlDeviceGetComputeRunningProcesses", device.handle)
        if running is None:
            return None
        processes = []
        for p in running:
            if p.pid not in self._owners:
                self._owners[p.pid] = self._owner(p.pid)
            user, command = self._owners[p.pid]
            processes.append(
                GpuProcess(
                    pid=p.pid,
                    mem_bytes=_valid_bytes(getattr(p, "usedGpuMemory", None)),
                    sm_pct=device.sm_by_pid.get(p.pid),
                    user=user,
                    command=command,
                )
            )
        if len(self._owners) > MAX_OWNERS:  # PIDs come and go: keep those still on a GPU
            self._owners = {p.pid: (p.user, p.command) for p in processes}
        return tuple(processes)

    def _gpm_supported(self, device: _Device) -> bool:
        if not all(self.nvml.has(name) for name in GPM_FUNCTIONS):
            return False
        if not self.nvml.has("c_nvmlGpmMetricsGet_t"):
            return False
        support = self.nvml.query("nvmlGpmQueryDeviceSupport", device.handle)
        return bool(support is not None and support.isSupportedDevice)

    def _gpm(self, device: _Device, now: float) -> dict[str, float | None]:
        """GPM metrics between the previous sample and this one (two samples >= 100 ms apart)."""
        nvml, query = self._module, self.nvml.query
        if device.gpm_previous is not None and now - device.gpm_previous_t < GPM_MIN_INTERVAL_S:
            return {}
        current = query("nvmlGpmSampleAlloc")
        if current is None or query("nvmlGpmSampleGet", device.handle, current) is None:
            if current is not None:
                query("nvmlGpmSampleFree", current)
            device.gpm_supported = False  # PCIe from its own call from now on
            return {}
        previous, device.gpm_previous, device.gpm_previous_t = device.gpm_previous, current, now
        if previous is None:
            return {}
        try:
            request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(_GPM_FIELDS)
            request.sample1 = previous
            request.sample2 = current
            for slot, metric_id in enumerate(_GPM_FIELDS.values()):
                request.metrics[slot].metricId = metric_id
            if query("nvmlGpmMetricsGet", request) is None:
                device.gpm_supported = False
                return {}
            values: dict[str, float | None] = {}
            for slot, name in enumerate(_GPM_FIELDS):
                metric = request.metrics[slot]
                ok = metric.nvmlReturn == 0 and metric.value == metric.value  # NaN check
                values[name] = float(metric.value) if ok else None
            return values
        finally:
            query("nvmlGpmSampleFree", previous)


# Owners kept for PIDs seen on a GPU; past this the table keeps those still there.
MAX_OWNERS = 1024


def process_owner(pid: int) -> tuple[str | None, str | None]:
    """A PID's user and command name (psutil); None where it cannot be read (another
    container's PID, a process that ended, one we may not see)."""
    try:
        import psutil

        process = psutil.Process(pid)
        with process.oneshot():
            return process.username(), process.name()
    except Exception:
        return None, None


def _attr(obj: Any, name: str) -> Any:
    return None if obj is None else getattr(obj, name, None)


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


def _valid_bytes(value: Any) -> int | None:
    # NVML reports NVML_VALUE_NOT_AVAILABLE (2**64 - 1) where it cannot see the memory.
    if value is None or value >= 2**63:
        return None
    return int(value)


def _describe(error: BaseException) -> str:
    if isinstance(error, ImportError):
        return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    text = str(error) or type(error).__name__
    if "Driver Not Loaded" in text or "Library Not Found" in text or "NVML Shared Library" in text:
        return f"no NVIDIA driver here ({text})"
    return text


class GpuSampling:
    """The NVML sampler as the monitor runs it: 2 Hz, its own tiers inside (module docstring).
    Without NVML the GPU figures read N/A, and the reason is shown."""

    name = "gpu"
    # As often as the TUI redraws by default (0.5 s), as nvitop samples at its refresh. NVML
    # averages utilization over its own sample period, 1/6 s to 1 s by product (NVML
    # reference, nvmlUtilization_t), so a 10 s window's mean is of 20 such periods, evenly
    # spread; 10 Hz made this thread 0.45% of a core on the H200 and 5 Hz 0.30%
    # (docs/benchmarks.md §5), as much as the hook client.
    period_s = 0.5
    cost = CHEAP

    def __init__(self, nvml: Any = None) -> None:
        self.sampler = NvmlSampler(nvml)

    def open(self, sink: Sink) -> None:
        try:
            names = self.sampler.open()
        except NvmlUnavailable as error:
            sink.apply(events.GpusFound((), error=str(error)))
            raise SamplerUnavailable(f"GPU figures are N/A: {error}") from error
        uuids, bus_ids = zip(*self.sampler.identities(), strict=True) if names else ((), ())
        sink.apply(
            events.GpusFound(
                tuple(names),
                driver=self.sampler.driver,
                uuids=uuids,
                pci_bus_ids=bus_ids,
                visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            )
        )

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        sink.apply(events.GpuSampled(self.sampler.sample()))

    def close(self) -> None:
        self.sampler.close()
