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

    @classmethod
    def from_row(cls, pid: int, row: list[Any]) -> Step | None:
        """A validated step from a wire row; None for a row that does not make sense."""
        if not len(wire.STEP_FIELDS) - 1 <= len(row) <= len(wire.STEP_FIELDS):
            return None
        if len(row) < len(wire.STEP_FIELDS):  # a hook from before comm_ms: not measured
            row = [*row, None]
        values = dict(zip(wire.STEP_FIELDS, row, strict=True))
        try:
            step = cls(pid=pid, **values)
        except TypeError:
            return None
        if not isinstance(step.step, int) or isinstance(step.step, bool):
            return None
        if step.step_ms is not None and (not _number(step.step_ms) or step.step_ms < 0):
            return None
        return step


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
