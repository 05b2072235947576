"""NVML sampler: per-GPU utilization, memory, power, clocks, PCIe, processes and GPM activity.

Every field may be N/A (None): a call that fails or is not supported never stops the
sampler. Fields are sampled in tiers by their CPU cost, measured on the reference H100 with
benchmarks/sampler_cost.py (docs/benchmarks.md): the whole fast tier ~0.17 ms, energy
~2.7 ms, per-process utilization ~1.9 ms, PCIe throughput ~0.7 ms of CPU (20 ms of wall time).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .. import events
from ..samples import GpuProcess, GpuSample
from .base import CHEAP, SamplerUnavailable, Sink

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


class _Device:
    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.name: str | None = None
        # Who the GPU is, as dcgm-exporter labels it (UUID, pci_bus_id): read once.
        self.uuid: str | None = None
        self.pci_bus_id: str | None = None
        self.medium: dict[str, Any] = {}
        self.slow: dict[str, Any] = {}
        self.gpm_supported = False
        self.gpm_previous: Any = None
        self.gpm_previous_t = 0.0
        self.process_util_ts = 0
        self.sm_by_pid: dict[int, float] = {}


class NvmlSampler:
    """Samples every visible GPU; construct with a fake module in tests (collect/fake.py)."""

    def __init__(
        self, nvml: Any = None, clock: Any = time.monotonic, wall_clock: Any = time.time
    ) -> None:
        self._nvml = nvml
        self._clock = clock
        self._wall_clock = wall_clock
        self._devices: list[_Device] = []
        self._next_medium = 0.0
        self._next_slow = 0.0
        self.driver: str | None = None

    def open(self) -> list[str | None]:
        """Initialise NVML; returns the GPU names. Raises NvmlUnavailable with the reason."""
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
            count = self._nvml.nvmlDeviceGetCount()
        except Exception as error:
            raise NvmlUnavailable(_describe(error)) from error
        self.driver = _text(self._call(getattr(self._nvml, "nvmlSystemGetDriverVersion", None)))
        for index in range(count):
            device = _Device(index, self._nvml.nvmlDeviceGetHandleByIndex(index))
            device.name = _text(self._call(self._nvml.nvmlDeviceGetName, device.handle))
            device.uuid = _text(self._call(self._nvml.nvmlDeviceGetUUID, device.handle))
            pci = self._call(getattr(self._nvml, "nvmlDeviceGetPciInfo", None), device.handle)
            device.pci_bus_id = _text(_attr(pci, "busId"))
            device.gpm_supported = self._gpm_supported(device)
            self._devices.append(device)
        return [d.name for d in self._devices]

    def identities(self) -> list[tuple[str | None, str | None]]:
        """Each GPU's UUID and PCI bus id (None: N/A), in index order, after ``open``."""
        return [(d.uuid, d.pci_bus_id) for d in self._devices]

    def close(self) -> None:
        for device in self._devices:
            if device.gpm_previous is not None:
                self._call(self._nvml.nvmlGpmSampleFree, device.gpm_previous)
                device.gpm_previous = None
        self._call(self._nvml.nvmlShutdown)

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
        nvml, handle = self._nvml, device.handle
        util = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
        if slow:
            device.slow = self._slow_fields(device)
        if medium:
            device.medium = self._medium_fields(device, now)
        fields = {**device.slow, **device.medium}
        return GpuSample(
            index=device.index,
            t=wall,
            name=device.name,
            util_pct=_attr(util, "gpu"),
            mem_util_pct=_attr(util, "memory"),
            mem_used_bytes=_attr(memory, "used"),
            mem_total_bytes=_attr(memory, "total"),
            **fields,
        )

    def _medium_fields(self, device: _Device, now: float) -> dict[str, Any]:
        nvml, handle = self._nvml, device.handle
        power_mw = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
        fields: dict[str, Any] = {
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "temp_c": self._call(nvml.nvmlDeviceGetTemperature, handle, 0),  # 0: GPU die
            "sm_clock_mhz": self._call(nvml.nvmlDeviceGetClockInfo, handle, 1),  # NVML_CLOCK_SM
            "mem_clock_mhz": self._call(nvml.nvmlDeviceGetClockInfo, handle, 2),  # NVML_CLOCK_MEM
            "throttle": self._throttle(handle),
            "processes": self._processes(device),
        }
        if device.gpm_supported:
            fields.update(self._gpm(device, now))
        return fields

    def _slow_fields(self, device: _Device) -> dict[str, Any]:
        nvml, handle = self._nvml, device.handle
        limit_mw = self._call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        energy_mj = self._call(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        fields: dict[str, Any] = {
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "energy_j": None if energy_mj is None else energy_mj / 1000.0,
            # The ceiling the SM clock is read against (a throttled GPU runs under it).
            "sm_clock_max_mhz": self._call(nvml.nvmlDeviceGetMaxClockInfo, handle, 1),
        }
        self._refresh_process_utilization(device)
        if not device.gpm_supported:  # GPM gives PCIe rates for free; else the slow call
            rx_kbps = self._call(nvml.nvmlDeviceGetPcieThroughput, handle, 1)  # RX_BYTES
            tx_kbps = self._call(nvml.nvmlDeviceGetPcieThroughput, handle, 0)  # TX_BYTES
            fields["pcie_rx_mibps"] = None if rx_kbps is None else rx_kbps / 1024.0
            fields["pcie_tx_mibps"] = None if tx_kbps is None else tx_kbps / 1024.0
        return fields

    def _throttle(self, handle: Any) -> tuple[str, ...] | None:
        getter = getattr(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            self._nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        bits = self._call(getter, handle) if getter else None
        if bits is None:
            return None
        return tuple(name for bit, name in _THROTTLE_BITS.items() if bits & bit and bit != 0x1)

    def _refresh_process_utilization(self, device: _Device) -> None:
        """SM % per PID since the last call (NVML keeps a short history of samples)."""
        utilization = self._call(
            self._nvml.nvmlDeviceGetProcessUtilization, device.handle, device.process_util_ts
        )
        sm_by_pid: dict[int, float] = {}
        for sample in utilization or []:
            sm_by_pid[sample.pid] = float(sample.smUtil)
            device.process_util_ts = max(device.process_util_ts, int(sample.timeStamp))
        device.sm_by_pid = sm_by_pid

    def _processes(self, device: _Device) -> tuple[GpuProcess, ...]:
        running = self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, device.handle)
        return tuple(
            GpuProcess(
                pid=p.pid,
                mem_bytes=_valid_bytes(getattr(p, "usedGpuMemory", None)),
                sm_pct=device.sm_by_pid.get(p.pid),
            )
            for p in running or []
        )

    def _gpm_supported(self, device: _Device) -> bool:
        query = getattr(self._nvml, "nvmlGpmQueryDeviceSupport", None)
        support = self._call(query, device.handle) if query else None
        return bool(support is not None and support.isSupportedDevice)

    def _gpm(self, device: _Device, now: float) -> dict[str, float | None]:
        """GPM metrics between the previous sample and this one (two samples >= 100 ms apart)."""
        nvml = self._nvml
        if device.gpm_previous is not None and now - device.gpm_previous_t < GPM_MIN_INTERVAL_S:
            return {}
        current = self._call(nvml.nvmlGpmSampleAlloc)
        if current is None or self._call_ok(nvml.nvmlGpmSampleGet, device.handle, current) is False:
            device.gpm_supported = current is not None
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
            nvml.nvmlGpmMetricsGet(request)
            values: dict[str, float | None] = {}
            for slot, name in enumerate(_GPM_FIELDS):
                metric = request.metrics[slot]
                ok = metric.nvmlReturn == 0 and metric.value == metric.value  # NaN check
                values[name] = float(metric.value) if ok else None
            return values
        except Exception:
            return {}
        finally:
            self._call(nvml.nvmlGpmSampleFree, previous)

    @staticmethod
    def _call(fn: Any, *args: Any) -> Any:
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:
            return None

    @staticmethod
    def _call_ok(fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
            return True
        except Exception:
            return False


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
                tuple(names), driver=self.sampler.driver, uuids=uuids, pci_bus_ids=bus_ids
            )
        )

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        sink.apply(events.GpuSampled(self.sampler.sample()))

    def close(self) -> None:
        self.sampler.close()
