"""Derived figures: computed once, N/A when unmeasured, right for several ranks."""

from __future__ import annotations

import pytest

from gputop_train import events
from gputop_train.samples import GpuSample
from gputop_train.session import stats
from gputop_train.session.model import Session
from gputop_train.session.steps import Step
from tests.support.clock import ManualClock


def _step(
    pid: int,
    n: int,
    step_ms: float,
    data_ms: float | None = 10.0,
    samples: int | None = 32,
    gpu_ms: float | None = None,
    t: float = 1000.0,
) -> Step:
    return Step(pid, n, t + n, step_ms, data_ms, samples, 1, gpu_ms, None, None, None)


def test_rates_are_work_over_time_and_shares_are_of_step_time() -> None:
    steps = [_step(1, n, step_ms=100.0, data_ms=25.0, gpu_ms=50.0) for n in range(1, 11)]
    result = stats.step_stats(steps, primary_pid=1)
    assert result.steps_per_s == pytest.approx(10.0)
    assert result.samples_per_s == pytest.approx(320.0)
    assert result.data_wait_pct == pytest.approx(25.0)
    assert result.gpu_time_pct == pytest.approx(50.0)


def test_percentiles_use_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert stats.percentile(values, 50) == 50.0
    assert stats.percentile(values, 95) == 95.0
    assert stats.percentile([], 50) is None


def test_unmeasured_figures_are_none_not_zero() -> None:
    steps = [_step(1, n, 100.0, data_ms=None, samples=None, gpu_ms=None) for n in range(1, 4)]
    result = stats.step_stats(steps, primary_pid=1)
    assert result.samples_per_s is None
    assert result.data_wait_pct is None
    assert result.gpu_time_pct is None
    assert stats.step_stats([], None).steps_per_s is None


def test_samples_per_second_adds_up_every_rank() -> None:
    rank0 = [_step(1, n, 100.0) for n in range(1, 6)]
    rank1 = [_step(2, n, 200.0) for n in range(1, 6)]
    result = stats.step_stats(rank0 + rank1, primary_pid=1)
    assert result.samples_per_s == pytest.approx(320.0 + 160.0)
    assert result.step_ms_p50 == 100.0  # step times are the primary rank's


def test_gpu_stats_average_utilization_and_keep_na() -> None:
    ticks = [
        (GpuSample(0, 1.0, util_pct=40.0, mem_used_bytes=2),),
        (GpuSample(0, 2.0, util_pct=60.0, mem_used_bytes=4),),
    ]
    result = stats.gpu_stats(ticks)
    assert result.util_pct == pytest.approx(50.0)
    assert result.mem_used_bytes == 4
    assert result.tensor_active_pct is None


def test_snapshot_windows_recent_steps_and_ignores_resent_backlog() -> None:
    now = ManualClock(2000.0)
    session = Session(clock=now)
    session.apply(events.ProcessHello.of(11, {"rank": 0, "argv": ["train.py"]}))
    rows = [[n, 1990.0 + n, 100.0, 10.0, 8, 1, None, None, None, None] for n in range(1, 10)]
    session.apply(events.StepRows(11, tuple(rows)))
    session.apply(events.StepRows(11, tuple(rows)))  # a re-attach sends the ring again
    snap = session.snapshot(window_s=5.0)
    assert snap.total_steps == 9
    assert snap.steps.steps == 4  # steps ending in the last 5 s: t = 1996..1999
    session.apply(events.StepRows(11, (["bad"], [10, 1.0, -5.0] + [None] * 7)))
    assert session.snapshot().dropped_frames == 2  # malformed rows are counted, not kept


def test_one_gpu_reads_utilization_over_the_window_as_a_node_of_several_does() -> None:
    # On the H100 at rung 4 one 10 Hz NVML reading said 0% while SM activity was 75%: the GPU
    # panel reads the window's mean, on one GPU as on eight (session/gpu_table.py).
    clock = ManualClock(1000.0)
    session = Session(clock=clock)
    for i, util in enumerate([90.0] * 9 + [0.0]):
        clock.now = 1000.0 + i * 0.1
        session.apply(events.GpuSampled((GpuSample(0, clock.now, util_pct=util),)))
    snap = session.snapshot()
    assert snap.latest_gpus[0].util_pct == 0.0
    assert snap.gpus[0].util_pct == pytest.approx(81.0) == snap.gpu.util_pct
