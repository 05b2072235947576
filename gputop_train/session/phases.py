"""Knob state as the monitor sees it, and phases: one per configuration, compared in a table.

A phase opens when a knob change is acknowledged by the primary process; it covers the steps
after the boundary at which the change was applied.

Warm-up rule (docs/phases.md): the first ``WARMUP_STEPS`` steps of a phase, and any further
steps that end within ``WARMUP_S`` seconds of the phase's first step, are warm-up: excluded
from the phase's figures and reported separately. That covers DataLoader workers starting,
cuDNN autotuning and the first-step compile of ``torch.compile`` (which lands in the first
step), without hiding a phase's steady state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..samples import GpuSample
from ..wire import KNOB_KINDS, KnobValue
from . import gpu_table, stats
from .steps import Step

# Five steps cover worker start-up and compile (both land in the first one or two steps);
# three seconds cover a slow first epoch of small steps. Judgement, checked on the H100 runs.
WARMUP_STEPS = 5
WARMUP_S = 3.0
# A phase's noise: the spread of its throughput between this many consecutive blocks of its
# measured steps (the autopilot keeps a change only when its gain clears it).
NOISE_BLOCKS = 4


# An observation of one phase's measured steps (and other ranks' steps meanwhile), or None
# with the reason it is too few: session/observe.py observe_measured.
Observe = Callable[
    [Sequence[Step], Sequence[Step]], tuple["stats.Observation | None", "str | None"]
]


@dataclass(frozen=True)
class KnobState:
    name: str
    kind: str
    value: KnobValue
    help: str
    choices: tuple[KnobValue, ...] | None
    minimum: int | None
    maximum: int | None
    pending: KnobValue | None = None
    error: str | None = None
    role: str | None = None  # what the knob does (docs/knobs.md), for the autopilot
    builtin: bool = False  # the hook's own knob (docs/knobs.md, "Built-in knobs")
    unavailable: str | None = None  # why this job cannot take it
    numerics: str | None = None  # how a change alters the numerics

    @property
    def spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "choices": list(self.choices) if self.choices else None,
            "min": self.minimum,
            "max": self.maximum,
        }


@dataclass(frozen=True)
class Phase:
    index: int  # 1-based
    change: str  # what opened it: "start", "num_workers=8", ...
    first_step: int  # the first step run with this configuration
    started_at: float
    failed: str | None = None  # set when the change that opened it was reverted


@dataclass(frozen=True)
class PhaseFigures:
    """A phase's figures over its measured (post-warm-up) steps, as every phase table shows
    them (tables.PhaseLine) and the JSON names them; None is N/A."""

    steps: int
    warmup_s: float | None
    samples_per_s: float | None
    step_ms_p50: float | None
    data_wait_pct: float | None
    gpu_util_pct: float | None
    tensor_active_pct: float | None
    peak_mem_bytes: int | None
    speedup: float | None


@dataclass(frozen=True)
class PhaseRow(PhaseFigures):
    """A phase, its figures, and what they were measured over."""

    phase: Phase
    warmup_steps: int
    observation: stats.Observation | None = None  # over the measured steps (None: too few)
    measured_s: float | None = None  # seconds the measured steps cover
    noise_pct: float | None = None  # largest block's deviation from the mean samples/s, %


def describe_knobs(knobs: Iterable[KnobState]) -> str:
    """The knobs a job takes and the values each accepts, for a refusal to list: a person who
    typed a wrong name sees the right ones at once."""
    shown = []
    for knob in knobs:
        if knob.unavailable:
            continue
        if knob.kind == "bool":
            accepts = "true/false"
        elif knob.kind == "int":
            low = "" if knob.minimum is None else knob.minimum
            high = "" if knob.maximum is None else knob.maximum
            accepts = f"{low}..{high}"
        else:
            accepts = "/".join(str(c) for c in knob.choices or ())
        shown.append(f"{knob.name} ({accepts}; now {knob.value})")
    return ", ".join(shown) if shown else "none yet"


def knob_state(spec: dict[str, Any]) -> KnobState | None:
    """A knob as advertised by the hook; None for a spec that makes no sense."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return None
    value = spec.get("value")
    if spec.get("kind") not in KNOB_KINDS or not isinstance(value, (bool, int, str)):
        return None
    choices = spec.get("choices")
    return KnobState(
        name=spec["name"],
        kind=spec["kind"],
        value=value,
        help=str(spec.get("help") or ""),
        choices=tuple(choices) if isinstance(choices, list) else None,
        minimum=spec.get("min") if isinstance(spec.get("min"), int) else None,
        maximum=spec.get("max") if isinstance(spec.get("max"), int) else None,
        role=spec.get("role") if isinstance(spec.get("role"), str) else None,
        builtin=spec.get("builtin") is True,
        unavailable=_text_or_none(spec.get("unavailable")),
        numerics=_text_or_none(spec.get("numerics")),
    )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def split_warmup(steps: Sequence[Step]) -> tuple[list[Step], list[Step]]:
    """(warm-up, measured) steps of one phase, by the rule in the module docstring."""
    timed = [s for s in steps if s.step_ms is not None]
    if not timed:
        return list(steps), []
    first_start = timed[0].t - timed[0].step_ms / 1000.0  # type: ignore[operator]
    cut = 0
    for index, step in enumerate(timed):
        if index < WARMUP_STEPS or step.t - first_start <= WARMUP_S:
            cut = index + 1
        else:
            break
    return timed[:cut], timed[cut:]


class PhaseTable:
    """The phase table. A closed phase's row is kept once a step of a later phase has arrived
    (a process sends its rows in order, each one as soon as its GPU time is known), so a
    redraw reads the open phase's steps only, not the whole run's (up to 100,000 steps)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Phase, int], PhaseRow] = {}
        self._primary_pid: int | None = None

    def rows(
        self,
        phases: Sequence[Phase],
        steps: Sequence[Step],
        gpu_ticks: Sequence[tuple[GpuSample, ...]],
        primary_pid: int | None,
        observe: Observe | None = None,
    ) -> list[PhaseRow]:
        """One row per phase; the speed-up is against the first phase with a throughput."""
        if primary_pid != self._primary_pid:
            self._kept.clear()
            self._primary_pid = primary_pid
        rows: list[PhaseRow] = []
        baseline: float | None = None
        last_step = next(
            (s.step for s in reversed(steps) if primary_pid is None or s.pid == primary_pid), 0
        )
        for index, phase in enumerate(phases):
            following = phases[index + 1] if index + 1 < len(phases) else None
            key = (phase, following.first_step) if following else None
            row = self._kept.get(key) if key else None
            if row is None:
                end = following.first_step if following else None
                row = _row(phase, end, steps, gpu_ticks, primary_pid, baseline, observe)
                if key and following and last_step >= following.first_step:
                    self._kept[key] = row
            if baseline is None and row.samples_per_s:
                baseline = row.samples_per_s
            rows.append(row)
        return rows


def _row(
    phase: Phase,
    end: int | None,
    steps: Sequence[Step],
    gpu_ticks: Sequence[tuple[GpuSample, ...]],
    primary_pid: int | None,
    baseline: float | None,
    observe: Observe | None,
) -> PhaseRow:
    own, other_ranks = _phase_steps(steps, phase.first_step, end, primary_pid)
    warmup, measured = split_warmup(own)
    window = _window(measured)
    # Other ranks' steps count towards samples/s over the primary's measured window.
    ranks = [s for s in other_ranks if window and window[0] < s.t <= window[1]]
    figures = stats.step_stats(measured + ranks, primary_pid)
    in_window = _ticks_between(gpu_ticks, window) if window else []
    gpu = stats.gpu_stats(in_window)
    warmup_s = sum(s.step_ms for s in warmup if s.step_ms) / 1000.0 if warmup else None
    samples_per_s = figures.samples_per_s
    baseline = baseline or samples_per_s  # the first phase with a throughput is 1.00x
    return PhaseRow(
        phase=phase,
        steps=len(measured),
        warmup_steps=len(warmup),
        warmup_s=warmup_s,
        samples_per_s=samples_per_s,
        step_ms_p50=figures.step_ms_p50,
        data_wait_pct=figures.data_wait_pct,
        gpu_util_pct=gpu.util_pct,
        tensor_active_pct=gpu.tensor_active_pct,
        peak_mem_bytes=_peak_memory(in_window, measured),
        speedup=samples_per_s / baseline if baseline and samples_per_s else None,
        observation=observe(measured, other_ranks)[0] if observe and measured else None,
        measured_s=window[1] - window[0] if window else None,
        noise_pct=noise_pct(measured, _samples),
    )


def noise_pct(steps: Sequence[Step], work: Callable[[Sequence[Step]], float]) -> float | None:
    """How far the rate of ``work`` (samples) over NOISE_BLOCKS blocks of consecutive steps
    strays from their mean, in %; None for too few steps, or a block with no time or work."""
    size = len(steps) // NOISE_BLOCKS
    if size < 2:
        return None
    rates = []
    for block in range(NOISE_BLOCKS):
        chunk = steps[block * size : (block + 1) * size]
        seconds = sum(s.step_ms or 0.0 for s in chunk) / 1000.0
        done = work(chunk)
        if seconds <= 0 or not done:
            return None
        rates.append(done / seconds)
    mean = sum(rates) / len(rates)
    return 100.0 * max(abs(rate - mean) for rate in rates) / mean


def _samples(steps: Sequence[Step]) -> float:
    return sum(s.samples or 0 for s in steps)


def _phase_steps(
    steps: Sequence[Step], first: int, end: int | None, primary_pid: int | None
) -> tuple[list[Step], list[Step]]:
    """(the primary's steps numbered first..end-1, other ranks' steps since), newest first
    walked: steps arrive in time order, so the walk stops at the phase's start."""
    own: list[Step] = []
    others: list[Step] = []
    for step in reversed(steps):
        if primary_pid is None or step.pid == primary_pid:
            if step.step < first:
                break
            if end is None or step.step < end:
                own.append(step)
        else:
            others.append(step)
    own.reverse()
    others.reverse()
    return own, others


def _ticks_between(
    ticks: Sequence[tuple[GpuSample, ...]], window: tuple[float, float]
) -> list[tuple[GpuSample, ...]]:
    found = []
    for tick in reversed(ticks):
        if not tick or tick[0].t > window[1]:
            continue
        if tick[0].t < window[0]:
            break
        found.append(tick)
    found.reverse()
    return found


def _window(measured: Sequence[Step]) -> tuple[float, float] | None:
    if not measured:
        return None
    first = measured[0]
    return first.t - (first.step_ms or 0.0) / 1000.0, measured[-1].t


def _peak_memory(ticks: Sequence[tuple[GpuSample, ...]], measured: Sequence[Step]) -> int | None:
    """Peak GPU memory over the phase's ticks: NVML's used memory of the fullest of the job's
    GPUs (per GPU, never a sum), else the allocator peak."""
    fullest = [full for tick in ticks if (full := gpu_table.fullest([vars(g) for g in tick]))]
    if fullest:
        return max(int(full["mem_used_bytes"]) for full in fullest)
    peaks = [s.mem_peak for s in measured if s.mem_peak is not None]
    return max(peaks) if peaks else None
