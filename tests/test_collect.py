"""Samplers on scripted backends: every field may be N/A, nothing kills a sampler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil as real_psutil
import pytest

from gputop_train.collect.fake import FakeGpu, FakeNvml, FakeProcess, FakePsutil
from gputop_train.collect.nvml import NvmlSampler, NvmlUnavailable
from gputop_train.collect.procs import (
    FULL_SCAN_PERIOD_S,
    ProcessSampler,
    ProcfsChildren,
    procfs_children_supported,
)
from tests.support.clock import ManualClock
from tests.support.waiting import wait_until


def test_nvml_sampler_reads_every_field_in_its_unit() -> None:
    gpu = FakeGpu(
        util=87,
        mem_used=3 * 2**30,
        power_mw=350_000,
        energy_mj=5_000_000,
        throttle_bits=0x4,
        processes=[(42, 2**30, 75)],
    )
    sampler = NvmlSampler(FakeNvml([gpu]), clock=ManualClock(100.0))
    assert sampler.open() == ["NVIDIA H100 80GB HBM3"]
    (sample,) = sampler.sample()
    assert sample.util_pct == 87
    assert sample.mem_used_bytes == 3 * 2**30
    assert sample.power_w == 350.0 and sample.power_limit_w == 700.0
    assert sample.energy_j == 5000.0
    assert sample.throttle == ("sw_power_cap",)
    assert sample.processes[0].pid == 42 and sample.processes[0].sm_pct == 75


def test_unsupported_calls_read_as_na_and_sampling_goes_on() -> None:
    gpu = FakeGpu(util=50, unsupported={"power", "temperature", "processes", "utilization"})
    sampler = NvmlSampler(FakeNvml([gpu]), clock=ManualClock(100.0))
    sampler.open()
    (sample,) = sampler.sample()
    assert sample.util_pct is None and sample.power_w is None and sample.temp_c is None
    assert sample.mem_total_bytes == gpu.mem_total  # what works still works


def test_gpm_metrics_come_from_two_samples_at_least_100ms_apart() -> None:
    clock = ManualClock(100.0)
    gpu = FakeGpu(gpm={2: 60.0, 3: 30.0, 5: 12.5, 10: 40.0, 20: 1.0, 21: float("nan")})
    sampler = NvmlSampler(FakeNvml([gpu]), clock=clock)
    sampler.open()
    (first,) = sampler.sample()
    assert first.tensor_active_pct is None  # one GPM sample is not a measurement yet
    clock.now += 1.0
    (second,) = sampler.sample()
    assert second.sm_active_pct == 60.0 and second.tensor_active_pct == 12.5
    assert second.pcie_rx_mibps is None  # NaN from NVML is N/A


def test_a_gpu_without_gpm_reads_pcie_through_the_slow_call_and_gpm_as_na() -> None:
    nvml = FakeNvml([FakeGpu(pcie_rx_kbps=2048)])
    sampler = NvmlSampler(nvml, clock=ManualClock(100.0))
    sampler.open()
    (sample,) = sampler.sample()
    assert sample.pcie_rx_mibps == 2.0
    assert sample.tensor_active_pct is None


def test_costly_fields_are_sampled_less_often_than_cheap_ones() -> None:
    clock = ManualClock(100.0)
    nvml = FakeNvml([FakeGpu(processes=[(4242, 2**30, 55)])])
    sampler = NvmlSampler(nvml, clock=clock)
    sampler.open()
    samples = []
    for _ in range(60):  # 6 s at the monitor's 10 Hz
        samples.append(sampler.sample()[0])
        clock.now += 0.1
    assert nvml.calls["utilization"] == 60
    assert nvml.calls["power"] == nvml.calls["processes"] == 6  # once a second
    # Milliseconds of CPU each on the H100: once every 5 s.
    assert nvml.calls["energy"] == nvml.calls["process_utilization"] == 2
    assert nvml.calls["pcie"] == 4  # RX and TX (no GPM on this GPU)
    # Between slow reads the last values stand: never N/A for lack of a fresh read.
    assert all(s.energy_j is not None and s.processes[0].sm_pct == 55 for s in samples)


def test_no_driver_is_reported_with_its_reason() -> None:
    sampler = NvmlSampler(FakeNvml(init_error="NVML Shared Library Not Found"))
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver"):
        sampler.open()


def _tree() -> FakePsutil:
    return FakePsutil(
        [
            FakeProcess(100, 1, "python", cpu=98.0),
            FakeProcess(101, 100, "pt_data_worker", cpu=95.0, read_bytes=0),
            FakeProcess(102, 100, "pt_data_worker", cpu=90.0),
            FakeProcess(103, 100, "sh", cpu=0.0),
        ]
    )


def test_process_tree_roles_cpu_and_io_rates() -> None:
    psutil, clock = _tree(), ManualClock(100.0)
    sampler = ProcessSampler(100, hooked_pids=lambda: {100}, psutil_module=psutil, clock=clock)
    first = {p.pid: p for p in sampler.sample()}
    assert first[100].role == "main" and first[101].role == "worker" and first[103].role == "child"
    assert first[101].io_read_bps is None  # a rate needs two readings
    psutil.processes[101].read_bytes = 4_000_000
    clock.now += 2.0
    second = {p.pid: p for p in sampler.sample()}
    assert second[101].io_read_bps == pytest.approx(2_000_000)
    assert second[102].cpu_pct == 90.0


def test_vanished_and_forbidden_processes_do_not_stop_sampling() -> None:
    psutil = _tree()
    sampler = ProcessSampler(100, psutil_module=psutil, clock=ManualClock(100.0))
    sampler.sample()
    del psutil.processes[102]
    psutil.processes[103].denied = True
    pids = {p.pid: p for p in sampler.sample()}
    assert 102 not in pids
    assert pids[103].cpu_pct is None  # N/A, not 0
    del psutil.processes[100]
    assert sampler.sample() == ()  # the whole job is gone


@pytest.mark.skipif(not procfs_children_supported(), reason="no /proc/PID/task/*/children")
def test_the_proc_children_files_find_the_same_tree_as_psutil() -> None:
    # A child that starts a grandchild: the tree walk must reach both, as psutil's does.
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(30)']); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(lambda: real_psutil.Process(child.pid).children(), 10, "the grandchild")
        by_proc = {p.pid for p in ProcessSampler(os.getpid()).sample()}
        by_psutil = {p.pid for p in ProcessSampler(os.getpid(), psutil_module=real_psutil).sample()}
        grandchild = real_psutil.Process(child.pid).children()[0].pid
        assert {os.getpid(), child.pid, grandchild} <= by_proc
        assert by_proc == by_psutil
    finally:
        for process in real_psutil.Process(child.pid).children(recursive=True):
            process.kill()
        child.kill()
        child.wait()


def fork(proc: Path, pid: int, tid: int, *children: int) -> None:
    """A /proc-like tree: thread ``tid`` of ``pid`` has these children."""
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "children").write_text("".join(f"{child} " for child in children))


def test_children_of_the_main_thread_show_at_once_and_of_others_by_the_next_full_scan(
    tmp_path: Path,
) -> None:
    clock = ManualClock(100.0)
    for tid in range(10, 40):  # an OpenMP pool: threads without children
        fork(tmp_path, 10, tid)
    fork(tmp_path, 10, 12, 200)  # the thread that iterates the DataLoader
    children = ProcfsChildren(str(tmp_path), clock)
    assert children(10) == [200]  # the first call reads every thread
    fork(tmp_path, 10, 12, 200, 201)  # the remembered thread forks again
    fork(tmp_path, 10, 10, 300)  # so does the main thread
    fork(tmp_path, 10, 25, 400)  # and a thread that had no children
    clock.now += 1.0
    assert sorted(children(10)) == [200, 201, 300]
    clock.now += FULL_SCAN_PERIOD_S
    assert sorted(children(10)) == [200, 201, 300, 400]


def test_a_process_that_ended_has_no_children_and_is_forgotten(tmp_path: Path) -> None:
    clock = ManualClock(100.0)
    fork(tmp_path, 10, 10, 11)
    fork(tmp_path, 11, 11)
    children = ProcfsChildren(str(tmp_path), clock)
    assert children(10) == [11] and children(11) == []
    (tmp_path / "11" / "task" / "11" / "children").unlink()  # 11 ended
    assert children(11) == []
    clock.now += 3 * FULL_SCAN_PERIOD_S
    children(10)  # a full scan: 11, not asked about since, is dropped
    assert children._parents.keys() == {10}
