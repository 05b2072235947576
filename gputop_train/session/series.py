"""Time series for charts: the session's raw samples binned into fixed-width buckets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..samples import GpuSample
from . import gpu_table
from .steps import Step

# Hook frames arrive within ~0.5 s of their steps: a completed bucket is binned again until
# it has been closed this long, then kept.
LATE_DATA_S = 1.0


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


@dataclass
class _Bucket:
    """Sums and counts of one bucket; means are taken when the series is read."""

    work: float = 0.0
    step_time: float = 0.0
    data_time: float = 0.0
    steps: int = 0
    util: float = 0.0
    util_n: int = 0
    tensor: float = 0.0
    tensor_n: int = 0
    mem: float = 0.0
    mem_n: int = 0

    def add_step(self, step: Step, counts_for_time: bool) -> None:
        if step.step_ms is None:
            return
        if step.samples is not None:
            self.work += step.samples
        if counts_for_time:
            self.step_time += step.step_ms
            self.data_time += step.data_ms or 0.0
            self.steps += 1

    def add_tick(self, tick: tuple[GpuSample, ...]) -> None:
        """One NVML tick of the job's GPUs, as ``gpu_table`` forms the job's figures: activity
        the mean over samples and GPUs, memory the fullest GPU's at the bucket's latest tick
        (ticks are walked newest first)."""
        for gpu in tick:
            if gpu.util_pct is not None:
                self.util += gpu.util_pct
                self.util_n += 1
            if gpu.tensor_active_pct is not None:
                self.tensor += gpu.tensor_active_pct
                self.tensor_n += 1
        if self.mem_n:
            return  # the bucket's memory is its latest tick's
        full = gpu_table.fullest([vars(g) for g in tick])
        if full is not None:  # the fullest of the job's GPUs: headroom is per GPU, never a sum
            self.mem = full["mem_used_bytes"]
            self.mem_n = 1


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


class ChartBinner:
    """Bins a sliding window into buckets on multiples of their width, incrementally.

    Buckets that closed more than ``LATE_DATA_S`` ago are kept between calls, so a redraw
    bins only the newest data: its cost does not grow with the window (30 minutes of steps
    at 50 steps/s would otherwise be walked at every redraw). The open bucket is left out,
    so a chart changes only when a bucket completes.
    """

    def __init__(self, window_s: float, buckets: int) -> None:
        self.window_s = window_s
        self.buckets = buckets
        self._width = window_s / buckets
        self._kept: dict[int, _Bucket] = {}
        self._primary_pid: int | None = None

    def series(
        self,
        steps: Sequence[Step],
        gpu_ticks: Sequence[tuple[GpuSample, ...]],
        now: float,
        primary_pid: int | None,
    ) -> ChartSeries:
        """``steps`` and ``gpu_ticks`` in arrival order (time order), newest last."""
        width = self._width
        last = int(now // width) - 1
        first = last - self.buckets + 1
        if primary_pid != self._primary_pid:
            self._kept.clear()
            self._primary_pid = primary_pid
        last_final = int((now - LATE_DATA_S) // width) - 1
        redo_from = next(
            (i for i in range(first, last + 1) if i > last_final or i not in self._kept),
            last + 1,
        )
        fresh = self._bin(steps, gpu_ticks, redo_from, last, primary_pid)
        kept = {i: bucket for i, bucket in self._kept.items() if first <= i < redo_from}
        for i in range(redo_from, min(last, last_final) + 1):  # empty ones too: gaps stay gaps
            kept[i] = fresh.get(i) or _Bucket()
        self._kept = kept
        window = [fresh.get(i) or kept.get(i) or _Bucket() for i in range(first, last + 1)]
        return ChartSeries(
            window_s=self.window_s,
            samples_per_s=tuple(
                b.work / (b.step_time / 1000.0) if b.step_time > 0 and b.work else None
                for b in window
            ),
            step_ms=tuple(_mean(b.step_time, b.steps) for b in window),
            data_wait_ms=tuple(_mean(b.data_time, b.steps) for b in window),
            gpu_util_pct=tuple(_mean(b.util, b.util_n) for b in window),
            tensor_active_pct=tuple(_mean(b.tensor, b.tensor_n) for b in window),
            gpu_mem_used_bytes=tuple(_mean(b.mem, b.mem_n) for b in window),
        )

    def _bin(
        self,
        steps: Sequence[Step],
        gpu_ticks: Sequence[tuple[GpuSample, ...]],
        first: int,
        last: int,
        primary_pid: int | None,
    ) -> dict[int, _Bucket]:
        """Buckets ``first..last`` from the data, walking back from the newest."""
        width, start, end = self._width, first * self._width, (last + 1) * self._width
        buckets: dict[int, _Bucket] = {}
        if first > last:
            return buckets
        for step in reversed(steps):
            if step.t >= end:
                continue
            if step.t < start:
                break
            bucket = buckets.setdefault(int(step.t // width), _Bucket())
            bucket.add_step(step, primary_pid is None or step.pid == primary_pid)
        for tick in reversed(gpu_ticks):
            if not tick or tick[0].t >= end:
                continue
            if tick[0].t < start:
                break
            buckets.setdefault(int(tick[0].t // width), _Bucket()).add_tick(tick)
        return buckets
