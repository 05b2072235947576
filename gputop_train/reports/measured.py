"""A run's figures for ``compare`` and ``check``, each with its own noise.

The figures are the session's own statistics (``session.stats.step_stats`` and ``gpu_stats``)
over the run's measured steps: every phase's warm-up left out by the phase table's rule
(``session.phases.split_warmup``), so a short CI run is not judged on its start-up. A figure's
noise is measured the way the phase table measures a phase's (``phases.NOISE_BLOCKS``
consecutive blocks of the measured steps): the largest distance of a block's figure from the
whole's. A change between two runs is beyond noise when it is larger than both runs' noises
added.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..samples import GpuSample
from ..session import stats
from ..session.phases import NOISE_BLOCKS, split_warmup
from ..session.steps import Step
from .box import BoxLoad, box_load
from .load import Run

Ticks = Sequence[tuple[GpuSample, ...]]


@dataclass(frozen=True)
class Figure:
    """One comparable figure: its key, its words, its unit and which way is better."""

    key: str
    name: str
    unit: str
    # None: a share that moves either way for good or bad reasons (data-wait falls when the
    # compute grows): its change is shown as higher or lower, never better or worse.
    higher_is_better: bool | None
    source: str
    attr: str = ""  # the statistic's attribute where it is not named as the key

    @property
    def field(self) -> str:
        return self.attr or self.key


# The figures measured over steps and GPU samples, in the order a comparison lists them.
STEP_FIGURES = (
    Figure("step_ms_p50", "step time p50", "ms", False, "hook"),
    Figure("step_ms_p95", "step time p95", "ms", False, "hook"),
    Figure("samples_per_s", "samples/s", "samples/s", True, "hook"),
    Figure("tokens_per_s", "tokens/s", "tokens/s", True, "hook"),
    Figure("data_wait_pct", "data-wait", "% of step time", None, "hook"),
)
RANK_FIGURES = ("step_ms_p50", "samples_per_s", "data_wait_pct")  # each rank's, side by side
GPU_FIGURES = (
    Figure("gpu_util_pct", "GPU utilization", "%", True, "NVML", "util_pct"),
    Figure("sm_active_pct", "SM activity", "%", True, "GPM"),
)


@dataclass(frozen=True)
class Measured:
    """A figure's value over the measured steps and its noise (None: N/A)."""

    value: float | None
    noise: float | None


@dataclass(frozen=True)
class RunFigures:
    """What ``compare`` reads of one run."""

    figures: dict[str, Measured]
    ranks: dict[str, dict[str, Measured]]  # "rank 0" -> figure key -> measured
    measured_steps: int
    warmup_note: str  # how the steps were chosen, for the reader
    box: BoxLoad  # the machine over the same steps


def run_figures(run: Run) -> RunFigures:
    windows, note = _measured_windows(run)
    steps = [s for s in run.steps if _inside(s.t, windows)]
    ticks = [t for t in run.gpu_ticks if t and _inside(t[0].t, windows)]
    blocks = _blocks(run, windows)
    figures: dict[str, Measured] = {}
    for figure in STEP_FIGURES:
        of_steps = functools.partial(_step_figure, figure.field, run.primary_pid)
        figures[figure.key] = _measure(of_steps, steps, ticks, blocks)
    for figure in GPU_FIGURES:
        figures[figure.key] = _measure(
            functools.partial(_gpu_figure, figure.field), steps, ticks, blocks
        )
    ranks: dict[str, dict[str, Measured]] = {}
    pids = {s.pid for s in steps}
    if len(pids) > 1:
        for pid in sorted(pids, key=lambda p: (run.ranks.get(p) is None, run.ranks.get(p), p)):
            own = [s for s in steps if s.pid == pid]
            ranks[run.label(pid)] = {
                key: _measure(functools.partial(_step_figure, key, pid), own, (), blocks)
                for key in RANK_FIGURES
            }
    primary = [s for s in steps if run.primary_pid is None or s.pid == run.primary_pid]
    return RunFigures(figures, ranks, len(primary), note, box_load(run.recording, windows))


def _step_figure(
    name: str, primary: int | None, steps: Sequence[Step], _ticks: Ticks
) -> float | None:
    value = getattr(stats.step_stats(steps, primary), name)
    return None if value is None else float(value)


def _gpu_figure(name: str, _steps: Sequence[Step], ticks: Ticks) -> float | None:
    value = getattr(stats.gpu_stats(ticks), name)
    return None if value is None else float(value)


def _measure(
    figure: Callable[[Sequence[Step], Ticks], float | None],
    steps: Sequence[Step],
    ticks: Ticks,
    blocks: list[tuple[float, float]],
) -> Measured:
    value = figure(steps, ticks)
    if value is None:
        return Measured(None, None)
    values = []
    for start, end in blocks:
        block = figure(
            [s for s in steps if start < s.t <= end],
            [t for t in ticks if start < t[0].t <= end],
        )
        if block is None:
            return Measured(float(value), None)
        values.append(float(block))
    noise = max(abs(v - value) for v in values) if len(values) == NOISE_BLOCKS else None
    return Measured(float(value), noise)


def _measured_windows(run: Run) -> tuple[list[tuple[float, float]], str]:
    """The spans of each phase's measured steps (the primary's), on the Unix clock."""
    own = [s for s in run.steps if run.primary_pid is None or s.pid == run.primary_pid]
    firsts = sorted(p.first_step for p in run.phases) or [0]
    windows = []
    for i, first in enumerate(firsts):
        end = firsts[i + 1] if i + 1 < len(firsts) else None
        phase = [s for s in own if s.step >= first and (end is None or s.step < end)]
        _, measured = split_warmup(phase)
        if measured:
            windows.append((measured[0].t - (measured[0].step_ms or 0.0) / 1000.0, measured[-1].t))
    if windows:
        return windows, "each phase's warm-up excluded (docs/phases.md)"
    if own:  # every step is warm-up: a run too short to leave it out
        return [(own[0].t - 1e-9, own[-1].t)], "every step (the run is all warm-up)"
    return [], "no steps recorded"


def _blocks(run: Run, windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``NOISE_BLOCKS`` spans of consecutive measured steps of the primary, equal in count."""
    own = [
        s
        for s in run.steps
        if (run.primary_pid is None or s.pid == run.primary_pid)
        and s.step_ms is not None
        and _inside(s.t, windows)
    ]
    size = len(own) // NOISE_BLOCKS
    if size < 2:
        return []
    spans = []
    for block in range(NOISE_BLOCKS):
        chunk = own[block * size : (block + 1) * size]
        spans.append((chunk[0].t - 1e-9, chunk[-1].t))
    return spans


def _inside(t: float, windows: list[tuple[float, float]]) -> bool:
    return any(start <= t <= end for start, end in windows)
