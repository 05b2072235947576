"""The recipes "add a GPU field" and "add a metric" of docs/architecture.md, end to end: a
new GPU field is a field and its two rows; an NVML figure is one row of
``collect.nvml.FIELDS``; a per-GPU metric one row of ``export.families.GPU_FAMILIES``
(per-rank and job metrics: tests/test_recipes_metric.py)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import pytest

from gputop_train import events
from gputop_train.collect import nvml
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.export import families, prometheus
from gputop_train.samples import GpuSample
from gputop_train.session import gpu_table, job_gpus
from gputop_train.session.model import Session
from gputop_train.views import status_fields, view_of
from tests.support.clock import ManualClock
from tests.support.metrics import exposition, samples


class ToyNvml(FakeNvml):
    """A driver with one more function: the memory's temperature."""

    def nvmlDeviceGetMemoryTemperatureToy(self, h: int) -> int:
        return 40 + h


def _session(fake: FakeNvml) -> Session:
    clock = ManualClock(1000.0)
    session = Session(command=("train.py",), clock=clock, started_at=990.0)
    sampler = nvml.NvmlSampler(fake, clock=clock, wall_clock=clock, owner=fake.owner)
    session.apply(events.GpusFound(tuple(sampler.open())))
    for _ in range(3):
        session.apply(events.GpuSampled(sampler.sample()))
        clock.advance(1.0)
    return session


def test_a_gpu_fields_source_is_one_row_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # The field exists on GpuSample (temp_c); its NVML function and conversion are its row.
    row = nvml.NvmlField("temp_c", "nvmlDeviceGetMemoryTemperatureToy", tier=nvml.MEDIUM)
    table = (*(r for r in nvml.FIELDS if r.field != "temp_c"), row)
    monkeypatch.setattr(nvml, "FIELDS", table)
    session = _session(ToyNvml([FakeGpu(temp=30), FakeGpu(temp=30)]))
    gpus = status_fields(view_of(session.snapshot()))["gpus"]
    assert [g["temp_c"] for g in gpus] == [40, 41]  # from the toy function, to the JSON
    # A driver without it: that field alone is N/A.
    session = _session(FakeNvml([FakeGpu(util=50), FakeGpu(util=50)]))
    gpus = status_fields(view_of(session.snapshot()))["gpus"]
    assert [g["temp_c"] for g in gpus] == [None, None] and gpus[0]["util_pct"] == 50


def test_a_new_metric_is_one_row_of_the_families(monkeypatch: pytest.MonkeyPatch) -> None:
    family = families.GpuFamily(
        "gpu_temperature_celsius", "GPU temperature (NVML)", lambda g, _: g.temp_c
    )
    monkeypatch.setattr(families, "GPU_FAMILIES", (*families.GPU_FAMILIES, family))
    text = exposition(_session(FakeNvml([FakeGpu(temp=55), FakeGpu(temp=61)])))
    found = samples(text, prometheus.PREFIX + "gpu_temperature_celsius")
    assert sorted(found.values()) == [55.0, 61.0]
    assert "# HELP gputop_train_gpu_temperature_celsius GPU temperature (NVML)" in text


def test_a_gpu_figures_window_json_name_and_rounding_are_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # mem_util_pct as the recipe's new field: its row alone says it is the latest sample's,
    # rounded to whole percent and named memory_busy_pct in gpus[] (tests/test_gpu_table.py
    # ties the row to GpuSample, GpuFigures and docs/headless.md).
    row = gpu_table.GpuField("mem_util_pct", gpu_table.LATEST, 0, json="memory_busy_pct")
    table = tuple(row if r.name == "mem_util_pct" else r for r in gpu_table.GPU_FIELDS)
    monkeypatch.setattr(gpu_table, "GPU_FIELDS", table)
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    clock = ManualClock(1000.0)
    session = Session(command=("train.py",), clock=clock, started_at=990.0)
    sampler = nvml.NvmlSampler(fake, clock=clock, wall_clock=clock, owner=fake.owner)
    session.apply(events.GpusFound(tuple(sampler.open())))
    for busy in (10, 20, 33):
        for gpu in fake.gpus:
            gpu.mem_util = busy
        session.apply(events.GpuSampled(sampler.sample()))
        clock.advance(1.0)
    gpus = status_fields(view_of(session.snapshot()))["gpus"]
    assert [g["memory_busy_pct"] for g in gpus] == [33, 33]  # the latest, not the mean (21)
    assert "mem_util_pct" not in gpus[0]
    assert session.snapshot().gpus[0].mem_util_pct == 33


def test_a_new_gpu_field_is_a_field_and_its_two_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # The recipe whole, on a toy field (fan_pct): 1. the field on GpuSample, 2. its NVML row,
    # 3. its figure's row, 4. the same field on GpuFigures; then it is read, windowed, named
    # and rounded into gpus[] with no other edit.
    @dataclass(frozen=True)
    class FanSample(GpuSample):
        fan_pct: float | None = None

    @dataclass(frozen=True)
    class FanFigures(job_gpus.GpuFigures):
        fan_pct: float | None = None

    class FanNvml(FakeNvml):
        turns = [30, 40, 51]  # one a sample

        def nvmlDeviceGetFanSpeedToy(self, h: int) -> int:
            return self.turns.pop(0)

    monkeypatch.setattr(nvml, "GpuSample", FanSample)
    monkeypatch.setattr(
        nvml, "FIELDS", (*nvml.FIELDS, nvml.NvmlField("fan_pct", "nvmlDeviceGetFanSpeedToy"))
    )
    row = gpu_table.GpuField("fan_pct", gpu_table.MEAN, 0, json="fan_speed_pct")
    monkeypatch.setattr(gpu_table, "GPU_FIELDS", (*gpu_table.GPU_FIELDS, row))
    # (the table's getters, which the row fills at import in the source)
    monkeypatch.setattr(gpu_table, "_FIELD", {**gpu_table._FIELD, "fan_pct": attrgetter("fan_pct")})
    monkeypatch.setattr(job_gpus, "GpuFigures", FanFigures)
    gpus = status_fields(view_of(_session(FanNvml([FakeGpu()])).snapshot()))["gpus"]
    assert gpus[0]["fan_speed_pct"] == 40  # the window's mean of 30, 40, 51, whole percent
