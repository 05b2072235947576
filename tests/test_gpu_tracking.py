"""The session's GPU part on its own (session/gpu_tracking.py, issue 47): the job's ticks
follow the choice of its GPUs, taken again (never twice) when the choice changes."""

from __future__ import annotations

from gputop_train import events
from gputop_train.samples import GpuProcess, GpuSample
from gputop_train.session.gpu_tracking import GpuTracking

UUIDS = ("GPU-a", "GPU-b", "GPU-c", "GPU-d")


def _tick(t: float, on: int | None = None, pid: int = 42) -> tuple[GpuSample, ...]:
    return tuple(
        GpuSample(i, t, util_pct=float(t), processes=(GpuProcess(pid, 1, None),) if i == on else ())
        for i in range(len(UUIDS))
    )


def test_the_jobs_ticks_are_taken_again_once_when_its_gpus_become_known() -> None:
    gpus = GpuTracking()
    gpus.found(events.GpusFound(("H100",) * 4, uuids=UUIDS))
    assert gpus.sampled(_tick(1.0), {42}, {}) is True  # none chosen -> every GPU, assumed
    assert gpus.chosen.assumed and len(gpus.job) == 1 and len(gpus.job[0]) == 4
    assert gpus.sampled(_tick(2.0), {42}, {}) is False and len(gpus.job) == 2
    assert gpus.sampled(_tick(3.0, on=2), {42}, {42: 0}) is True  # NVML lists the job on GPU 2
    assert gpus.chosen.indices == (2,) and not gpus.chosen.assumed
    assert [tick[0].t for tick in gpus.job] == [1.0, 2.0, 3.0]  # every tick once, GPU 2 alone
    assert all(len(tick) == 1 and tick[0].index == 2 for tick in gpus.job)
    assert len(gpus.every) == 3


def test_a_ranks_gpu_is_the_one_its_hook_names_over_a_stray_context() -> None:
    gpus = GpuTracking()
    gpus.found(events.GpusFound(("H100",) * 4, uuids=UUIDS))
    gpus.sampled(_tick(1.0, on=0), {42}, {})  # a stray context on GPU 0
    gpus.device_reported(42, "GPU-d")
    gpus.sampled(_tick(2.0, on=0), {42}, {})
    assert gpus.rank_gpus()[42] == {3} and gpus.chosen.indices == (3,)
