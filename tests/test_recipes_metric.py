"""The recipe "add a metric" of docs/architecture.md for a rank's and the job's families: each
is one row of ``export.families.RANK_FAMILIES`` or ``JOB_FAMILIES`` (a GPU's:
tests/test_recipes_gpu.py). And every row of the three tables is served, with a sample, by a
session that measures every figure: no family is declared and never served."""

from __future__ import annotations

from typing import Any

import pytest

from gputop_train.export import families
from gputop_train.export.families import Family, GpuFamily, LabelledFamily, seconds
from gputop_train.export.prometheus import JOB_LABELS, PREFIX
from gputop_train.session.stats import RankStats
from gputop_train.views import View, view_of
from tests.support.measured import STEP_MS, measured_session
from tests.support.metrics import exposition, samples


def _series_name(row: Family[Any] | LabelledFamily[Any] | GpuFamily) -> str:
    """The name its samples carry: a counter's with ``_total``."""
    counter = not isinstance(row, GpuFamily) and row.kind == "counter"
    return PREFIX + row.name + ("_total" if counter else "")


def test_every_row_of_every_table_is_served_with_a_sample() -> None:
    text = exposition(measured_session())
    rows = [*families.RANK_FAMILIES, *families.GPU_FAMILIES, *families.JOB_FAMILIES]
    assert [r for r in rows if not samples(text, _series_name(r))] == []
    # Each series carries its subject's labels, then the row's own.
    own: dict[str, tuple[str, ...]] = {}
    for rank_row in families.RANK_FAMILIES:
        own[_series_name(rank_row)] = (*families.RANK_LABELS, *rank_row.labels)
    for gpu_row in families.GPU_FAMILIES:
        own[_series_name(gpu_row)] = families.GPU_LABELS
    for job_row in families.JOB_FAMILIES:
        own[_series_name(job_row)] = job_row.labels
    for name, labels in own.items():
        assert {tuple(sorted(k for k, _ in s)) for s in samples(text, name)} == {
            tuple(sorted((*JOB_LABELS, *labels)))
        }, name


def test_a_new_rank_metric_is_one_row_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    steps_per_s = Family[RankStats](
        "steps_per_second", "optimizer steps/s over the window", lambda r: r.steps.steps_per_s
    )
    quantiles = LabelledFamily[RankStats](
        "step_quantile_seconds",
        "step time at each quantile over the window",
        ("quantile",),
        lambda r: ((("0.5",), seconds(r.steps.step_ms_p50)), (("0.95",), None)),
    )
    table = (*families.RANK_FAMILIES, steps_per_s, quantiles)
    monkeypatch.setattr(families, "RANK_FAMILIES", table)
    session = measured_session()
    ranks = session.snapshot(window_s=30.0).ranks
    text = exposition(session)
    served = {dict(k)["rank"]: v for k, v in samples(text, PREFIX + "steps_per_second").items()}
    assert served == {str(r.who.rank): pytest.approx(r.steps.steps_per_s) for r in ranks}
    assert "# HELP gputop_train_steps_per_second optimizer steps/s over the window" in text
    # A row's own label: a series per value; None is no series, never a 0.
    by_quantile = samples(text, PREFIX + "step_quantile_seconds")
    assert {(dict(k)["rank"], dict(k)["quantile"]) for k in by_quantile} == {
        ("0", "0.5"),
        ("1", "0.5"),
    }
    assert sorted(by_quantile.values()) == [pytest.approx(STEP_MS / 1000.0)] * 2


def test_a_new_job_metric_is_one_row_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = Family[View]("job_ranks", "ranks measured in the window", lambda v: len(v.snap.ranks))
    table = (*families.JOB_FAMILIES, ranks)
    monkeypatch.setattr(families, "JOB_FAMILIES", table)
    session = measured_session()
    expected = len(view_of(session.snapshot(window_s=30.0)).snap.ranks)
    text = exposition(session)
    assert list(samples(text, PREFIX + "job_ranks").values()) == [float(expected)]
    assert "# TYPE gputop_train_job_ranks gauge" in text
