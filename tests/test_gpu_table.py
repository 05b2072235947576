"""GPU figures declared once (issue 47): the rows of ``session.gpu_table`` are tied to the
sample, to each GPU's figures, to the job's and to the JSON; and a figure has one window
wherever it is shown, on a node of one GPU, four and eight."""

from __future__ import annotations

import typing
from dataclasses import fields
from pathlib import Path

import pytest

from gputop_train import events, format, views
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.export.prometheus import PREFIX
from gputop_train.samples import GpuSample
from gputop_train.session import gpu_table, job_gpus, stats
from gputop_train.session.model import Session
from gputop_train.tui.panels import text as panels
from tests.support.clock import ManualClock
from tests.support.metrics import exposition, samples

DOCS = Path(__file__).resolve().parent.parent / "docs"
ROWS = gpu_table.GPU_FIELDS
IDENTITY = {"index", "uuid", "name", "job", "pids", "ranks", "job_mem_bytes", "others"}


def _names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def test_every_sample_field_is_one_row_or_named_apart() -> None:
    names = [row.name for row in ROWS]
    assert len(names) == len(set(names)), "a field with two rows"
    assert set(names).isdisjoint(gpu_table.APART)
    assert set(names) | gpu_table.APART == set(_names(GpuSample))
    windows = {gpu_table.MEAN, gpu_table.LATEST, gpu_table.UNION}
    ways = {gpu_table.GPUS_MEAN, gpu_table.GPUS_SUM, gpu_table.FULLEST, None}
    assert all(row.window in windows and row.job in ways for row in ROWS)


def test_each_gpus_figures_are_the_rows_in_order_and_of_the_samples_types() -> None:
    figures = [n for n in _names(job_gpus.GpuFigures) if n not in IDENTITY]
    assert figures == [row.name for row in ROWS]
    sample = typing.get_type_hints(GpuSample)
    figure = typing.get_type_hints(job_gpus.GpuFigures)
    for row in ROWS:
        assert figure[row.name] == sample[row.name], row.name


def test_the_jobs_figures_are_the_job_rows_and_each_has_its_json_name() -> None:
    job = [n for n in _names(stats.GpuStats) if n != "gpus"]
    assert job == [row.name for row in gpu_table.JOB_FIELDS]
    assert all(row.job_json for row in gpu_table.JOB_FIELDS)


def test_the_json_has_a_key_per_row_and_docs_headless_names_each() -> None:
    session = _session(gpus=2, ticks=4)
    fields_ = views.status_fields(views.view_of(session.snapshot()))
    gpu = fields_["gpus"][0]
    assert set(gpu) == IDENTITY | {row.json_name for row in ROWS}
    assert {row.job_json for row in gpu_table.JOB_FIELDS} <= set(fields_)
    documented = (DOCS / "headless.md").read_text()
    for row in ROWS:
        assert f"`{row.json_name}`" in documented, f"gpus[].{row.json_name} not in the docs"


# -- one window per figure, on one GPU and on eight --------------------------------------------

UTIL = [90, 90, 90, 90, 0]  # bursts: one reading of 0 among 90s (a GPU waiting for data)
POWER_MW = [600_000, 600_000, 600_000, 600_000, 100_000]
JOB_PID = 4242


def _session(gpus: int, ticks: int = 20) -> Session:
    """A job on GPU 0 of a node of ``gpus``, NVML at 2 Hz for ``ticks`` samples."""
    clock = ManualClock(1000.0)
    session = Session(command=("train.py",), clock=clock, started_at=990.0)
    fake = FakeNvml([FakeGpu(gpm={}) for _ in range(gpus)])
    fake.gpus[0].processes = [(JOB_PID, 40 * 2**30, 90)]
    sampler = NvmlSampler(fake, clock=clock, wall_clock=clock, owner=fake.owner)
    session.apply(events.GpusFound(tuple(sampler.open())))
    session.apply(events.ProcessHello.of(JOB_PID, {"argv": ["train.py"]}))
    for i in range(ticks):
        for gpu in fake.gpus:
            gpu.util = UTIL[i % len(UTIL)]
            gpu.power_mw = POWER_MW[i % len(POWER_MW)]
        session.apply(events.GpuSampled(sampler.sample()))
        clock.advance(0.5)
    return session


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_a_gpus_utilization_has_one_window_on_screen_json_and_prometheus(gpus: int) -> None:
    session = _session(gpus)
    snap = session.snapshot()
    (mine,) = [g for g in snap.gpus if g.job]
    ticks = [t for t in session.all_gpu_ticks() if snap.t - snap.window_s < t[0].t <= snap.t]
    window_mean = sum(t[0].util_pct or 0.0 for t in ticks) / len(ticks)
    assert mine.util_pct == pytest.approx(window_mean)
    assert mine.util_pct != snap.latest_gpus[0].util_pct  # not the instant reading
    assert snap.gpu.util_pct == pytest.approx(window_mean)  # the job's: its one GPU
    shown = format.pct(mine.util_pct)
    panel = panels.gpu_panel(snap, 98).plain
    assert shown in panel.splitlines()[1 if gpus == 1 else 2]  # the GPU's util line/row
    fields_ = views.status_fields(views.view_of(snap))
    assert fields_["gpus"][0]["util_pct"] == round(window_mean, 1) == fields_["gpu_util_pct"]
    # The exporter's own window (tests/support/metrics.py: 30 s), read as the screen reads it.
    scraped = session.snapshot(window_s=30.0).gpus[0].util_pct
    assert scraped is not None and scraped != snap.latest_gpus[0].util_pct
    found = samples(exposition(session), PREFIX + "gpu_utilization_ratio")
    util = next(v for labels, v in found.items() if ("gpu", "0") in labels)
    assert util == pytest.approx(scraped / 100)


@pytest.mark.parametrize("gpus", [1, 8])
def test_power_is_each_gpus_window_mean_and_the_jobs_their_sum(gpus: int) -> None:
    session = _session(gpus)
    snap = session.snapshot()
    each = {g.power_w for g in snap.gpus}
    assert len(each) == 1 and snap.gpus[0].power_w is not None
    assert 100.0 < snap.gpus[0].power_w < 600.0  # a mean over the window, not the latest
    assert snap.gpu.power_w == pytest.approx(snap.gpus[0].power_w)  # the job's one GPU


def test_the_fullest_gpu_is_one_function_for_the_job_the_charts_and_the_phases() -> None:
    small = {"mem_used_bytes": 30, "mem_total_bytes": 40}  # 75% full
    large = {"mem_used_bytes": 60, "mem_total_bytes": 100}  # more bytes, 60% full
    assert gpu_table.fullest([large, small]) is small
    assert gpu_table.fullest([{"mem_used_bytes": None}]) is None
    ticks = [
        (
            GpuSample(0, 1.0, mem_used_bytes=30, mem_total_bytes=40),
            GpuSample(1, 1.0, mem_used_bytes=60, mem_total_bytes=100),
        )
    ]
    assert stats.gpu_stats(ticks).mem_used_bytes == 30
