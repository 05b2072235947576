"""Time series for charts: the session's raw samples binned into fixed-width buckets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..collect.nvml import GpuSample
from .steps import Step


@dataclass(frozen=True)
class ChartSeries:
    """One value per bucket, oldest first; None where the bucket holds no data (a gap)."""

    window_s: float
    samples_per_s: tuple[float | None, ...]
    step_ms: tuple[float | None, ...]
    data_wait_ms: tuple[float | None, ...]
    gpu_util_pct: tuple[float | None, ...]
    tensor_active_pct: tuple[float | None, ...]
    gpu_mem_used_bytes: tuple[float | None, ...]


def _bucket_index(t: float, start: float, width: float, buckets: int) -> int | None:
    index = int((t - start) // width)
    return index if 0 <= index < buckets else None


def _means(sums: list[float], counts: list[int]) -> tuple[float | None, ...]:
    return tuple(s / c if c else None for s, c in zip(sums, counts, strict=True))


def chart_series(
    steps: Sequence[Step],
    gpu_ticks: Sequence[tuple[GpuSample, ...]],
    now: float,
    window_s: float,
    buckets: int,
    primary_pid: int | None,
) -> ChartSeries:
    # Buckets sit on multiples of their width and the open one is left out, so a chart
    # changes only when a bucket completes (a redraw, and terminal bytes, per bucket).
    width = window_s / buckets
    start = (now // width) * width - window_s
    work = [0.0] * buckets
    step_time = [0.0] * buckets
    data_time = [0.0] * buckets
    step_count = [0] * buckets
    for step in steps:
        index = _bucket_index(step.t, start, width, buckets)
        if index is None or step.step_ms is None:
            continue
        if step.samples is not None:
            work[index] += step.samples
        if primary_pid is None or step.pid == primary_pid:
            step_time[index] += step.step_ms
            data_time[index] += step.data_ms or 0.0
            step_count[index] += 1
    util, tensor, mem = [0.0] * buckets, [0.0] * buckets, [0.0] * buckets
    util_n, tensor_n, mem_n = [0] * buckets, [0] * buckets, [0] * buckets
    for tick in gpu_ticks:
        if not tick:
            continue
        index = _bucket_index(tick[0].t, start, width, buckets)
        if index is None:
            continue
        for gpu in tick:
            if gpu.util_pct is not None:
                util[index] += gpu.util_pct
                util_n[index] += 1
            if gpu.tensor_active_pct is not None:
                tensor[index] += gpu.tensor_active_pct
                tensor_n[index] += 1
        used = [g.mem_used_bytes for g in tick if g.mem_used_bytes is not None]
        if used:
            mem[index] += sum(used)
            mem_n[index] += 1
    return ChartSeries(
        window_s=window_s,
        samples_per_s=tuple(
            w / (t / 1000.0) if t > 0 and w else None for w, t in zip(work, step_time, strict=True)
        ),
        step_ms=_means(step_time, step_count),
        data_wait_ms=_means(data_time, step_count),
        gpu_util_pct=_means(util, util_n),
        tensor_active_pct=_means(tensor, tensor_n),
        gpu_mem_used_bytes=_means(mem, mem_n),
    )
