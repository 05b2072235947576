"""A run's raw series as arrays on the run's clock (seconds since it started), per process
and per GPU; NaN where a value was not measured."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .load import Run


@dataclass(frozen=True)
class ProcessSeries:
    label: str  # "rank 1" or "PID 1234"
    t: np.ndarray  # each step's end
    step_ms: np.ndarray
    data_ms: np.ndarray
    samples: np.ndarray
    tokens: np.ndarray
    mem_alloc: np.ndarray
    mem_peak: np.ndarray


@dataclass(frozen=True)
class GpuSeries:
    index: int
    name: str
    t: np.ndarray
    util_pct: np.ndarray
    sm_active_pct: np.ndarray
    mem_used_bytes: np.ndarray


def _array(values: list[float | int | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def processes(run: Run) -> list[ProcessSeries]:
    """One series per process that stepped, the primary first, then by rank."""
    by_pid: dict[int, list] = {}
    for step in run.steps:
        if step.step_ms is not None:
            by_pid.setdefault(step.pid, []).append(step)
    order = sorted(
        by_pid,
        key=lambda p: (p != run.primary_pid, run.ranks.get(p) is None, run.ranks.get(p) or 0, p),
    )
    start = run.started_at
    found = []
    for pid in order:
        steps = by_pid[pid]
        found.append(
            ProcessSeries(
                label=run.label(pid),
                t=np.array([s.t - start for s in steps]),
                step_ms=_array([s.step_ms for s in steps]),
                data_ms=_array([s.data_ms for s in steps]),
                samples=_array([s.samples for s in steps]),
                tokens=_array([s.tokens for s in steps]),
                mem_alloc=_array([s.mem_alloc for s in steps]),
                mem_peak=_array([s.mem_peak for s in steps]),
            )
        )
    return found


def gpus(run: Run) -> list[GpuSeries]:
    by_index: dict[int, list] = {}
    for tick in run.gpu_ticks:
        for sample in tick:
            by_index.setdefault(sample.index, []).append(sample)
    start = run.started_at
    return [
        GpuSeries(
            index=index,
            name=samples[-1].name or f"GPU {index}",
            t=np.array([s.t - start for s in samples]),
            util_pct=_array([s.util_pct for s in samples]),
            sm_active_pct=_array([s.sm_active_pct for s in samples]),
            mem_used_bytes=_array([s.mem_used_bytes for s in samples]),
        )
        for index, samples in sorted(by_index.items())
    ]
