"""The step record as the monitor keeps it (one per optimizer step per process)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import wire


@dataclass(frozen=True, slots=True)
class Step:
    pid: int
    step: int
    t: float
    step_ms: float | None  # None for a first step whose start nobody saw
    data_ms: float | None
    samples: int | None
    batches: int
    gpu_ms: float | None
    mem_alloc: int | None
    mem_reserved: int | None
    mem_peak: int | None
    comm_ms: float | None = None  # waiting in collectives; None: not measured
    # From the model's forwards and the step's marks (docs/steps.md); None: not measured.
    tokens: int | None = None
    host_gap_ms: float | None = None
    part_data_ms: float | None = None
    part_fwd_ms: float | None = None
    part_bwd_ms: float | None = None
    part_opt_ms: float | None = None
    part_rest_ms: float | None = None
    part_clock: str | None = None

    @classmethod
    def from_row(cls, pid: int, row: list[Any]) -> Step | None:
        """A validated step from a wire row; None for a row that does not make sense."""
        if not _FIRST_FIELDS <= len(row) <= len(wire.STEP_FIELDS):
            return None  # shorter rows: a hook (or recording) from before the later columns
        values = dict(zip(wire.STEP_FIELDS, row, strict=False))
        try:
            step = cls(pid=pid, **values)
        except TypeError:
            return None
        if not isinstance(step.step, int) or isinstance(step.step, bool):
            return None
        if step.step_ms is not None and (not _number(step.step_ms) or step.step_ms < 0):
            return None
        if not all(
            _number(getattr(step, name)) for name in _PARTS if getattr(step, name) is not None
        ):
            return None
        if step.part_clock not in (None, "gpu", "host"):
            return None
        if step.tokens is not None and (not isinstance(step.tokens, int) or step.tokens < 0):
            return None
        return step


# The columns every hook has sent (step .. mem_peak); later ones are optional on replay.
_FIRST_FIELDS = 10
_PARTS = (
    "host_gap_ms",
    "part_data_ms",
    "part_fwd_ms",
    "part_bwd_ms",
    "part_opt_ms",
    "part_rest_ms",
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
