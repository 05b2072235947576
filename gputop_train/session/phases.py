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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..collect.nvml import GpuSample
from . import stats
from .steps import Step

# Five steps cover worker start-up and compile (both land in the first one or two steps);
# three seconds cover a slow first epoch of small steps. Judgement, checked on the H100 runs.
WARMUP_STEPS = 5
WARMUP_S = 3.0


@dataclass(frozen=True)
class KnobState:
    name: str
    kind: str
    value: Any
    help: str
    choices: tuple[Any, ...] | None
    minimum: int | None
    maximum: int | None
    pending: Any = None
    error: str | None = None

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
class PhaseRow:
    """A phase's figures over its measured (post-warm-up) steps; None is N/A."""

    phase: Phase
    steps: int
    warmup_steps: int
    warmup_s: float | None
    samples_per_s: float | None
    step_ms_p50: float | None
    data_wait_pct: float | None
    gpu_util_pct: float | None
    tensor_active_pct: float | None
    peak_mem_bytes: int | None
    speedup: float | None
    observation: Any = None  # stats.Observation over the measured steps


def knob_state(spec: dict[str, Any]) -> KnobState | None:
    """A knob as advertised by the hook; None for a spec that makes no sense."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return None
    if spec.get("kind") not in ("bool", "int", "choice"):
        return None
    choices = spec.get("choices")
    return KnobState(
        name=spec["name"],
        kind=spec["kind"],
        value=spec.get("value"),
        help=str(spec.get("help") or ""),
        choices=tuple(choices) if isinstance(choices, list) else None,
        minimum=spec.get("min") if isinstance(spec.get("min"), int) else None,
        maximum=spec.get("max") if isinstance(spec.get("max"), int) else None,
    )


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


def phase_rows(
    phases: Sequence[Phase],
    steps: Sequence[Step],
    gpu_ticks: Sequence[tuple[GpuSample, ...]],
    primary_pid: int | None,
    observe: Callable[..., Any] | None = None,
) -> list[PhaseRow]:
    """One row per phase; the speed-up is against the first phase with a throughput."""
    own = [s for s in steps if primary_pid is None or s.pid == primary_pid]
    # Other ranks: their steps count towards samples/s over the primary's measured window.
    other_ranks = [s for s in steps if primary_pid is not None and s.pid != primary_pid]
    rows: list[PhaseRow] = []
    baseline: float | None = None
    for index, phase in enumerate(phases):
        end = phases[index + 1].first_step if index + 1 < len(phases) else None
        in_phase = [s for s in own if s.step >= phase.first_step and (end is None or s.step < end)]
        warmup, measured = split_warmup(in_phase)
        window = _window(measured)
        ranks = [s for s in other_ranks if window and window[0] < s.t <= window[1]]
        figures = stats.step_stats(measured + ranks, primary_pid)
        in_window = (
            [t for t in gpu_ticks if t and window[0] <= t[0].t <= window[1]] if window else []
        )
        gpu = stats.gpu_stats(in_window)
        if baseline is None and figures.samples_per_s:
            baseline = figures.samples_per_s
        warmup_s = sum(s.step_ms for s in warmup if s.step_ms) / 1000.0 if warmup else None
        observation = None
        if observe is not None and window is not None:
            observation = observe(measured, in_window, window[0], window[1])
        rows.append(
            PhaseRow(
                phase=phase,
                steps=len(measured),
                warmup_steps=len(warmup),
                warmup_s=warmup_s,
                samples_per_s=figures.samples_per_s,
                step_ms_p50=figures.step_ms_p50,
                data_wait_pct=figures.data_wait_pct,
                gpu_util_pct=gpu.util_pct,
                tensor_active_pct=gpu.tensor_active_pct,
                peak_mem_bytes=_peak_memory(in_window, measured),
                speedup=(figures.samples_per_s / baseline)
                if baseline and figures.samples_per_s
                else None,
                observation=observation,
            )
        )
    return rows


def _window(measured: Sequence[Step]) -> tuple[float, float] | None:
    if not measured:
        return None
    first = measured[0]
    return first.t - (first.step_ms or 0.0) / 1000.0, measured[-1].t


def _peak_memory(ticks: Sequence[tuple[GpuSample, ...]], measured: Sequence[Step]) -> int | None:
    """Peak GPU memory over the phase's ticks: NVML's used memory, else the allocator peak."""
    used = [sum(g.mem_used_bytes for g in tick if g.mem_used_bytes is not None) for tick in ticks]
    if used:
        return max(used)
    peaks = [s.mem_peak for s in measured if s.mem_peak is not None]
    return max(peaks) if peaks else None
