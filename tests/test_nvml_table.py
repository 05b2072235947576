"""NVML by table (issue 40): a function missing from nvidia-ml-py or the driver, or one that
raises NVMLError, is N/A for its own figures alone; our own bugs still raise."""

from __future__ import annotations

from dataclasses import fields

import pytest

from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.collect.nvml import FIELDS, GPM_FUNCTIONS, PROCESS_FUNCTIONS, NvmlSampler
from gputop_train.samples import GpuSample
from tests.support.clock import ManualClock

GPM = {2: 60.0, 3: 30.0, 5: 12.5, 10: 40.0, 20: 1.0, 21: 2.0}
GPM_FIELDS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_pct")


def _functions() -> list[str]:
    """Every NVML function the sampler reads a figure from."""
    table = {name for spec in FIELDS for name in _names(spec.function)}
    return sorted(table | set(PROCESS_FUNCTIONS) | set(GPM_FUNCTIONS))


def _names(function: str | tuple[str, ...]) -> tuple[str, ...]:
    return (function,) if isinstance(function, str) else function


def _figures_of(function: str, how: str, gpm: bool) -> set[str]:
    """The GpuSample fields that come from ``function`` (N/A without it)."""
    if function == "nvmlGpmSampleFree":  # without it GPM stays off rather than leak samples
        return set(GPM_FIELDS) if how == "absent" else set()
    if function in GPM_FUNCTIONS:  # PCIe then comes from its own call
        return set(GPM_FIELDS)
    if function in PROCESS_FUNCTIONS:
        if function == "nvmlDeviceGetComputeRunningProcesses":
            return {"processes", "processes_listed"}  # unknown, not none: said (docs/gpus.md)
        return set()
    # A function with another name (renamed in NVML) loses nothing while the other answers.
    own = {spec.field for spec in FIELDS if (function,) == _names(spec.function)}
    if gpm:  # GPM gives PCIe: the slow call is not made
        own -= {"pcie_rx_mibps", "pcie_tx_mibps"}
    return own


def _gpu() -> FakeGpu:
    return FakeGpu(util=70, mem_used=2**30, throttle_bits=0x4, processes=[(42, 2**30, 60)])


def _sample_all_tiers(nvml: FakeNvml, gpm: bool) -> GpuSample:
    clock = ManualClock(100.0)
    sampler = NvmlSampler(nvml, clock=clock, owner=nvml.owner)
    sampler.open()
    sampler.sample()
    clock.advance(6.0)  # past every tier's period, GPM's pair included
    (sample,) = sampler.sample()
    return sample


def _na(value: object) -> bool:
    """N/A as a sample says it: None, no processes, or no process list."""
    return value is None or value == () or value is False


def _figures(sample: GpuSample) -> dict[str, object]:
    skip = {"index", "t", "name", "error"}  # who it is, and why none is read (a lost GPU)
    return {f.name: getattr(sample, f.name) for f in fields(sample) if f.name not in skip}


@pytest.mark.parametrize("how", ["absent", "not_found"])
@pytest.mark.parametrize("function", _functions())
@pytest.mark.parametrize("gpm", [False, True], ids=["no-gpm", "gpm"])
def test_without_any_one_function_every_other_figure_is_read(
    function: str, how: str, gpm: bool
) -> None:
    gpu = _gpu()
    gpu.gpm = dict(GPM) if gpm else None
    missing = frozenset({function})
    nvml = FakeNvml([gpu], **{how: missing})  # type: ignore[arg-type]
    figures = _figures(_sample_all_tiers(nvml, gpm))
    lost = _figures_of(function, how, gpm)
    expected_na = set() if gpm else set(GPM_FIELDS)  # a GPU without GPM has none of them
    for name, value in figures.items():
        if name in lost:
            assert _na(value), f"{name} should be N/A without {function}"
        elif name not in expected_na:
            assert not _na(value), f"{name} went N/A without {function}"
    if function == "nvmlDeviceGetProcessUtilization":
        processes = figures["processes"]
        assert isinstance(processes, tuple) and len(processes) == 1
        assert processes[0].sm_pct is None and processes[0].mem_bytes == 2**30


def test_with_every_function_every_figure_is_read() -> None:
    gpu = _gpu()
    gpu.gpm = dict(GPM)
    figures = _figures(_sample_all_tiers(FakeNvml([gpu]), gpm=True))
    assert [name for name, value in figures.items() if _na(value)] == []


def test_a_function_missing_is_noted_once_with_its_reason() -> None:
    nvml = FakeNvml([_gpu()], not_found=frozenset({"nvmlDeviceGetPowerUsage"}))
    clock = ManualClock(100.0)
    sampler = NvmlSampler(nvml, clock=clock)
    sampler.open()
    for _ in range(5):
        sampler.sample()
        clock.advance(1.0)
    assert list(sampler.nvml.unavailable) == ["nvmlDeviceGetPowerUsage"]
    assert "Function Not Found" in sampler.nvml.unavailable["nvmlDeviceGetPowerUsage"]


def test_the_fake_answers_a_name_it_does_not_know_as_the_driver_would() -> None:
    nvml = FakeNvml()
    with pytest.raises(FakeNvml.NVMLError, match="Function Not Found"):
        nvml.nvmlDeviceGetSomethingNew(0)


def test_our_own_bug_in_a_transform_raises() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, h: int) -> int:
            return "not a number"  # type: ignore[return-value]  # our conversion then fails

    sampler = NvmlSampler(Broken([_gpu()]), clock=ManualClock(100.0))
    sampler.open()
    with pytest.raises(TypeError):
        sampler.sample()


def test_memory_used_leaves_out_the_drivers_reserved_memory_as_nvidia_smi_does() -> None:
    reserved = 615 * 2**20  # what v1 read above nvidia-smi on each H200 (docs/gpus.md)
    nvml = FakeNvml([FakeGpu(mem_used=2**30, mem_reserved=reserved)])
    assert _sample_all_tiers(nvml, gpm=False).mem_used_bytes == 2**30


def test_memory_falls_back_to_v1_on_a_driver_without_v2() -> None:
    reserved = 615 * 2**20
    gpu = FakeGpu(mem_used=2**30, mem_reserved=reserved, unsupported={"memory_v2"})
    sample = _sample_all_tiers(FakeNvml([gpu]), gpm=False)
    assert sample.mem_used_bytes == 2**30 + reserved
    assert sample.mem_total_bytes == gpu.mem_total
