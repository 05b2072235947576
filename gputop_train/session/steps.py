"""The step record as the monitor keeps it (one per optimizer step per process)."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

from .. import wire


@dataclass(frozen=True, slots=True)
class Step:
    """A process's step: its PID, then the columns of ``wire.STEP_COLUMNS`` with their
    types, in their order (tests/test_step_columns.py holds the two equal)."""

    pid: int
    step: int
    t: float
    step_ms: float | None  # None for a first step whose start nobody saw
    data_ms: float | None
    samples: int | None
    batches: int | None
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
        """A validated step from a wire row, each column of its type; None for a row that
        does not make sense."""
        if not _FIRST_FIELDS <= len(row) <= len(_COLUMN_TYPES):
            return None  # shorter rows: a hook (or recording) from before the later columns
        for value, (accepted, nullable) in zip(row, _COLUMN_TYPES, strict=False):
            if type(value) not in accepted and not (value is None and nullable):
                return None
        step = cls(pid, *row)
        if step.step_ms is not None and step.step_ms < 0:
            return None
        if step.part_clock not in (None, "gpu", "host"):
            return None
        if step.tokens is not None and step.tokens < 0:
            return None
        return step


def _accepted(hint: Any) -> tuple[frozenset[type], bool]:
    """The Python types a JSON value of a column's declared type may have (a bool is no
    number; a float column takes an integer), and whether it may be null."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    accepted = {t for t in options if t is not type(None)}
    if float in accepted:
        accepted.add(int)
    return frozenset(accepted), type(None) in options


# Each column's accepted types, in the row's order: checked once per row, cheaply.
_COLUMN_TYPES = tuple(_accepted(hint) for hint in wire.STEP_COLUMNS.values())
# The columns every hook has sent (step .. mem_peak); later ones are optional on replay.
_FIRST_FIELDS = wire.COLUMN["mem_peak"] + 1
