"""Chart series: buckets on multiples of their width, and incremental binning that agrees
with binning from scratch while walking only the newest data."""

from __future__ import annotations

import pytest

from gputop_train.samples import GpuSample
from gputop_train.session.series import LATE_DATA_S, ChartBinner
from gputop_train.session.steps import Step
from tests.support.counting import CountingList

T0 = 1_800_000_000.0  # a wall-clock time on a multiple of every bucket width used here


def step_at(t: float, step_ms: float = 100.0, data_ms: float = 20.0, pid: int = 1) -> Step:
    return Step(pid, 0, t, step_ms, data_ms, 32, 1, None, None, None, None)


def tick_at(t: float, util: float) -> tuple[GpuSample, ...]:
    return (GpuSample(0, t, util_pct=util, mem_used_bytes=2**30),)


def test_buckets_hold_means_leave_gaps_empty_and_skip_the_open_bucket() -> None:
    steps = [step_at(T0 + 0.2), step_at(T0 + 0.7, step_ms=300.0, data_ms=60.0)]
    steps.append(step_at(T0 + 2.5))  # bucket 2; bucket 1 stays a gap
    steps.append(step_at(T0 + 3.1))  # the open bucket at now = T0 + 3.5
    ticks = [tick_at(T0 + 0.1, 40.0), tick_at(T0 + 0.6, 60.0)]
    series = ChartBinner(window_s=4.0, buckets=4).series(steps, ticks, T0 + 3.5, primary_pid=1)
    # Buckets [T0-1, T0), [T0, T0+1), [T0+1, T0+2), [T0+2, T0+3); [T0+3, now) is still open.
    assert series.step_ms == (None, 200.0, None, 100.0)
    assert series.data_wait_ms == (None, 40.0, None, 20.0)
    assert series.samples_per_s[1] == pytest.approx(64 / 0.4)  # two steps of 32 in 400 ms
    assert series.gpu_util_pct == (None, 50.0, None, None)


def test_incremental_binning_matches_binning_from_scratch() -> None:
    live = ChartBinner(window_s=10.0, buckets=10)
    steps: list[Step] = []
    ticks: list[tuple[GpuSample, ...]] = []
    t = T0
    while t < T0 + 30.0:
        t += 0.05
        if not T0 + 12.0 < t < T0 + 15.0:  # a 3 s stall: empty buckets must stay empty
            steps.append(step_at(t, step_ms=50.0 + (t * 7) % 13))
        if round(t * 20) % 2 == 0:
            ticks.append(tick_at(t, util=(t * 3) % 100))
        # A step that arrives late (its frame came 0.5 s after it) lands in a closed bucket.
        if round(t * 20) % 37 == 0:
            steps.append(step_at(t - 0.5 * LATE_DATA_S))
            steps.sort(key=lambda s: s.t)
        now = t + 0.01
        assert live.series(steps, ticks, now, 1) == ChartBinner(10.0, 10).series(
            steps, ticks, now, 1
        )


def test_a_redraw_walks_only_the_newest_data() -> None:
    binner = ChartBinner(window_s=1800.0, buckets=60)  # the 30-minute window: 30 s buckets
    steps = CountingList(step_at(T0 + i * 0.02) for i in range(90_000))  # 30 min at 50/s
    now = T0 + 1800.0 + 0.5
    CountingList.walked = 0
    binner.series(steps, [], now, 1)
    first_walk = CountingList.walked
    CountingList.walked = 0
    binner.series(steps, [], now + 0.5, 1)
    assert first_walk > 80_000  # the first draw bins the whole window once
    assert CountingList.walked < 0.02 * first_walk  # then only the last buckets' steps


def test_a_new_primary_process_starts_the_bins_afresh() -> None:
    binner = ChartBinner(window_s=4.0, buckets=4)
    steps = [step_at(T0 + 0.5, step_ms=100.0, pid=1), step_at(T0 + 0.6, step_ms=300.0, pid=2)]
    assert binner.series(steps, [], T0 + 3.5, primary_pid=1).step_ms[1] == 100.0
    assert binner.series(steps, [], T0 + 3.6, primary_pid=2).step_ms[1] == 300.0
