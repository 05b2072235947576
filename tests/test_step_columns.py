"""A step row is typed per column (wire.STEP_COLUMNS) and the monitor's ``Step`` has those
columns, with those types, in that order: a column added on one side alone fails here."""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.session.steps import Step

# A row of every column measured, each of its type.
FULL: list[Any] = [7, 1_700_000_000.5, 20.0, 1.5, 32, 1, 18.0, 1 << 30, 2 << 30, 3 << 30, 0.5]
FULL += [4096, 0.25, 1.0, 6.0, 9.0, 2.0, 1.75, "gpu"]


def test_step_is_the_pid_then_the_step_columns_with_their_types() -> None:
    hints = typing.get_type_hints(Step)
    names = [f.name for f in fields(Step)]
    assert names[0] == "pid" and hints["pid"] is int
    assert names[1:] == list(wire.STEP_FIELDS)
    assert {name: hints[name] for name in names[1:]} == wire.STEP_COLUMNS


def test_a_row_of_every_column_reads_back_column_for_column() -> None:
    assert len(FULL) == len(wire.STEP_FIELDS)
    step = Step.from_row(5, FULL)
    assert step is not None
    assert [getattr(step, name) for name in wire.STEP_FIELDS] == FULL


@pytest.mark.parametrize("name", wire.STEP_FIELDS)
def test_a_column_of_another_type_drops_the_row(name: str) -> None:
    wrong = 1.5 if wire.STEP_COLUMNS[name] in (str | None, int, int | None) else "12"
    row = list(FULL)
    row[wire.COLUMN[name]] = wrong
    assert Step.from_row(5, row) is None
    row[wire.COLUMN[name]] = True  # a JSON true is no number
    assert Step.from_row(5, row) is None


def test_a_float_column_takes_an_integer_and_an_unmeasured_one_null() -> None:
    row = list(FULL)
    row[wire.COLUMN["t"]], row[wire.COLUMN["gpu_ms"]] = 1_700_000_000, None
    step = Step.from_row(5, row)
    assert step is not None and step.t == 1_700_000_000 and step.gpu_ms is None
    row[wire.COLUMN["t"]] = None  # every row has its time
    assert Step.from_row(5, row) is None
