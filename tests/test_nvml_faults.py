"""NVML as real nodes have it (issue 46), a scenario per fault as gpustat's tests have them:
an older binding, a GPU fallen off the bus, an unknown error, no process list. Each is N/A
for the figures it touches alone; a GPU NVML cannot read is a row that says why, and every
other GPU is read; the monitor never stops for one."""

from __future__ import annotations

import json

import pytest

from gputop_train import events, headless, views
from gputop_train.collect.fake import FakeGpu, FakeNvml, OldBindingNvml
from gputop_train.collect.nvml import GpuSampling, NvmlSampler
from gputop_train.session.job_gpus import NO_PROCESS_LIST
from gputop_train.session.model import Session
from gputop_train.tui.panels import text as panels
from tests.support.clock import ManualClock
from tests.support.gpu_node import GIB, Node, node_session

RESERVED = 615 * 2**20  # the driver's own memory v1 counts as used (docs/gpus.md)


def _sampler(nvml: FakeNvml) -> tuple[NvmlSampler, ManualClock]:
    clock = ManualClock(100.0)
    sampler = NvmlSampler(nvml, clock=clock, wall_clock=clock, owner=nvml.owner)
    sampler.open()
    return sampler, clock


# -- an older binding -------------------------------------------------------------------------


def test_an_old_binding_without_the_memory_version_reads_v1_and_every_other_figure() -> None:
    # pynvml 11.4.1: nvmlDeviceGetMemoryInfo(handle) only, no nvmlMemory_v2; a TypeError when
    # given a version was our bug before, and the monitor read "NVML lists no GPU".
    nvml = OldBindingNvml([FakeGpu(util=70, mem_used=2 * GIB, mem_reserved=RESERVED)])
    assert not hasattr(nvml, "nvmlMemory_v2")
    with pytest.raises(TypeError):
        nvml.nvmlDeviceGetMemoryInfo(0, 0x02000028)  # type: ignore[call-arg]
    sampler, _ = _sampler(nvml)
    (sample,) = sampler.sample()
    assert sample.mem_used_bytes == 2 * GIB + RESERVED  # v1: the reserved memory counted
    assert sample.mem_total_bytes == 80 * GIB and sample.util_pct == 70
    assert sample.power_w == 70.0 and sample.error is None
    assert "TypeError" in sampler.nvml.unavailable["nvmlDeviceGetMemoryInfo"]


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_a_node_on_an_old_binding_shows_every_gpu_and_the_jobs(gpus: int) -> None:
    node = Node(gpus=gpus, ranks={4242: gpus - 1}, binding=OldBindingNvml)
    snap = node_session(node)[0].snapshot()
    assert snap.job_gpus is not None and snap.job_gpus.indices == (gpus - 1,)
    assert "NVML lists no GPU" not in snap.job_gpus.reason
    assert len(snap.gpus) == gpus and snap.gpu.util_pct == 100
    assert snap.gpu.mem_used_bytes == 62 * GIB  # the fake reserves none: v1 equals v2


# -- a GPU fallen off the bus -----------------------------------------------------------------


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_a_gpu_lost_before_the_monitor_starts_is_a_row_and_the_others_are_read(gpus: int) -> None:
    lost = gpus // 2
    job_on = 0 if lost else None
    ranks = {4242: job_on} if job_on is not None and gpus > 1 else {}
    node = Node(gpus=gpus, ranks=ranks, broken={lost: "lost"})
    snap = node_session(node)[0].snapshot()
    shown = {g.index: g for g in snap.gpus}
    assert sorted(shown) == list(range(gpus))
    assert shown[lost].error == "GPU is lost" and shown[lost].util_pct is None
    assert all(g.error is None and g.mem_total_bytes for i, g in shown.items() if i != lost)
    fields = views.status_fields(views.view_of(snap))
    assert fields["gpus"][lost]["error"] == "GPU is lost"
    status = headless.status_line(views.view_of(snap))
    assert f"GPU {lost}: GPU is lost" in status
    panel = panels.gpu_panel(snap, 38).plain
    assert f"{lost:>2} GPU is lost" in panel


def test_a_lost_gpu_is_not_assumed_to_be_the_jobs() -> None:
    node = Node(gpus=4, ranks={4242: 0}, touched=False, nvml_sees_job=False, broken={2: "lost"})
    snap = node_session(node)[0].snapshot()
    assert snap.job_gpus is not None and snap.job_gpus.indices == (0, 1, 3)
    assert "every GPU NVML reads (3 of 4)" in snap.job_gpus.reason


def test_a_gpu_lost_mid_run_says_so_and_is_asked_nothing_more() -> None:
    nvml = FakeNvml([FakeGpu(util=50, gpm={2: 10.0}), FakeGpu(util=60), FakeGpu(util=70)])
    sampler, clock = _sampler(nvml)
    assert [s.util_pct for s in sampler.sample()] == [50, 60, 70]
    nvml.gpus[1].broken = "lost"
    clock.advance(6.0)  # every tier due: each call on GPU 1 would fail
    first = sampler.sample()
    assert [(s.util_pct, s.error) for s in first] == [(50, None), (None, "GPU is lost"), (70, None)]
    asked = dict(nvml.calls)
    clock.advance(6.0)
    again = sampler.sample()
    assert again[1].error == "GPU is lost" and again[1].processes_listed is False
    # GPUs 0 and 2 were read again; GPU 1 was asked nothing (a lost GPU's calls can hang).
    assert nvml.calls["utilization"] - asked["utilization"] == 2


def test_the_monitor_starts_with_a_lost_gpu() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(broken="lost"), FakeGpu()])
    session = Session(clock=ManualClock(100.0))
    sampling = GpuSampling(nvml)
    sampling.open(session)
    snap = session.snapshot()
    assert snap.nvml_error is None and len(snap.gpu_names) == 3
    assert snap.gpu_uuids[1] is None and snap.gpu_uuids[0] is not None


# -- an unknown error -------------------------------------------------------------------------


def test_an_unknown_error_opening_one_gpu_is_its_row_with_nvmls_words() -> None:
    nvml = FakeNvml([FakeGpu(util=40), FakeGpu(broken="unknown")])
    sampler, _ = _sampler(nvml)
    ok, bad = sampler.sample()
    assert ok.util_pct == 40 and bad.error == "Unknown Error"


def test_an_unknown_error_mid_run_is_na_for_that_gpus_figures_not_a_lost_row() -> None:
    nvml = FakeNvml([FakeGpu(util=40), FakeGpu(util=45)])
    sampler, clock = _sampler(nvml)
    sampler.sample()
    nvml.gpus[1].broken = "unknown"
    clock.advance(6.0)
    ok, bad = sampler.sample()
    assert ok.util_pct == 40 and bad.util_pct is None and bad.error is None
    nvml.gpus[1].broken = None  # a transient error: read again at the next sample
    clock.advance(6.0)
    assert sampler.sample()[1].util_pct == 45


# -- no process list --------------------------------------------------------------------------

NO_PROCESSES = frozenset({"nvmlDeviceGetComputeRunningProcesses"})


@pytest.mark.parametrize("gpus", [4, 8])
def test_without_a_process_list_every_gpu_is_assumed_and_it_says_why(gpus: int) -> None:
    node = Node(gpus=gpus, ranks={4242: 1}, absent=NO_PROCESSES)
    snap = node_session(node)[0].snapshot()
    job = snap.job_gpus
    assert job is not None and job.assumed and job.indices == tuple(range(gpus))
    assert not job.processes_listed and NO_PROCESS_LIST in job.reason
    view = views.view_of(snap)
    assert views.status_fields(view)["job_gpus"]["processes_listed"] is False
    assert f"GPU 0-{gpus - 1} of {gpus} assumed (NVML lists no processes)" in (
        headless.status_line(view)
    )
    assert "NVML here lists no GPU's" in panels.gpu_panel(snap, 98).plain


def test_without_a_process_list_the_hooks_device_still_tells_and_others_are_unseen() -> None:
    node = Node(gpus=4, ranks={4242: 2}, absent=NO_PROCESSES, hook_reports_uuid=True)
    job = node_session(node)[0].snapshot().job_gpus
    assert job is not None and not job.assumed and job.indices == (2,)
    assert "hook reports the device by UUID" in job.reason
    assert "other users' processes are not seen" in job.reason


def test_a_recording_of_a_lost_gpu_replays_it() -> None:
    node = Node(gpus=4, ranks={4242: 0}, broken={3: "lost"})
    session, _ = node_session(node)
    tick = session.all_gpu_ticks()[-1]
    item = events.GpuSampled(tick)
    kind, payload = events.encode(item)
    again = events.decode({"kind": kind, **json.loads(json.dumps(payload))})
    assert isinstance(again, events.GpuSampled)
    assert again.samples[3].error == "GPU is lost" and again.samples[3].processes_listed is False
    assert again.samples[0].processes_listed is True and again.samples[0].mem_total_bytes
