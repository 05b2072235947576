"""``gputop-train compare``: two real CPU runs side by side, each figure judged against the
runs' own noise (reports/measured.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gputop_train.reports.compare import BEYOND, NOT_COMPARABLE, WITHIN, compare
from gputop_train.reports.load import load
from tests.support import shared_runs
from tests.support.cli import gputop
from tests.support.recorded_runs import record_sleepy
from tests.support.synthetic_recording import write_synthetic

pytestmark = pytest.mark.torch

# Each batch takes 20 ms to load and each step 10 ms to compute: without workers the loop
# waits for data two thirds of each step; two workers load while it computes.
SLEEPY = ("batch_ms=20", "step_ms=10", "steps=300")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def make(folder: Path) -> dict[str, str]:
        record_sleepy(
            {"before": SLEEPY, "again": SLEEPY, "workers": (*SLEEPY, "workers=2")}, folder
        )
        return {}

    return shared_runs.once(tmp_path_factory, ("compare", SLEEPY), make)[1]


def test_more_workers_is_named_with_its_data_wait_change_and_its_gain(runs: Path) -> None:
    result = gputop("compare", str(runs / "before.jsonl"), str(runs / "workers.jsonl"))
    assert result.returncode == 0, result.stderr
    headline = result.stdout.splitlines()[3]
    assert headline.startswith("B (num_workers 0 -> 2"), headline
    assert "samples/s" in headline and "data-wait" in headline

    as_json = gputop(
        "compare", str(runs / "before.jsonl"), str(runs / "workers.jsonl"), "--format", "json"
    )
    comparison = json.loads(as_json.stdout)
    rows = {row["key"]: row for row in comparison["rows"]}
    wait, rate = rows["data_wait_pct"], rows["samples_per_s"]
    assert wait["verdict"] == BEYOND and wait["b"] < wait["a"]
    assert rate["verdict"] == BEYOND and rate["better"] and rate["b"] > rate["a"]
    assert ["num_workers", 0, 2] in comparison["knobs"]


def test_two_identical_runs_differ_by_nothing_beyond_noise(runs: Path) -> None:
    comparison = compare(load(runs / "before.jsonl"), load(runs / "again.jsonl"))
    assert comparison.headline == "no change beyond noise"
    judged = [r for r in comparison.rows if r.noise is not None]
    assert {r.key for r in judged} >= {"step_ms_p50", "samples_per_s", "data_wait_pct"}
    assert all(r.verdict == WITHIN for r in judged)
    assert comparison.warnings == [] and comparison.knobs == []


def test_the_markdown_form_holds_the_table_and_what_differs(runs: Path) -> None:
    result = gputop(
        "compare", str(runs / "before.jsonl"), str(runs / "workers.jsonl"), "--format", "md"
    )
    assert result.returncode == 0, result.stderr
    assert "| figure | A | B | change | verdict |" in result.stdout
    assert "knobs that differ: num_workers 0 -> 2" in result.stdout


def test_gpu_figures_of_cpu_runs_are_na_with_their_reason(runs: Path) -> None:
    comparison = compare(load(runs / "before.jsonl"), load(runs / "again.jsonl"))
    gpu = next(r for r in comparison.rows if r.key == "gpu_util_pct")
    assert gpu.verdict == "N/A" and "no GPU figures" in gpu.why


def test_runs_of_other_scripts_machines_and_ranks_are_compared_with_warnings(
    runs: Path, tmp_path: Path
) -> None:
    write_synthetic(tmp_path / "eight.jsonl", seconds=60.0)
    comparison = compare(load(runs / "before.jsonl"), load(tmp_path / "eight.jsonl"))
    warned = " | ".join(comparison.warnings)
    for words in ("different scripts", "different machines", "different GPUs", "ranks: 1 vs 8"):
        assert words in warned, warned


def test_mfu_across_precisions_is_marked_not_comparable(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "a.jsonl", seconds=30.0)
    a = load(tmp_path / "a.jsonl")
    b = dataclasses.replace(a, summary=json.loads(json.dumps(a.summary)))
    for run, precision in ((a, "bf16"), (b, "fp32")):
        run.summary["figures"]["mfu"]["precision"] = precision
    mfu = next(r for r in compare(a, b).rows if r.key == "mfu_pct")
    assert mfu.verdict == NOT_COMPARABLE and "bf16 vs fp32" in mfu.why


def test_a_missing_recording_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = gputop("compare", str(tmp_path / "no.jsonl"), str(tmp_path / "no.jsonl"))
    assert result.returncode == 2
    assert "no recording at" in result.stderr and "Traceback" not in result.stderr


def test_each_rank_of_a_multi_rank_run_is_compared_with_its_namesake(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "a.jsonl", ranks=4, seconds=60.0, knob_at_s=1000.0)
    write_synthetic(tmp_path / "b.jsonl", ranks=4, seconds=60.0, knob_at_s=1000.0, step_ms=300.0)
    comparison = compare(load(tmp_path / "a.jsonl"), load(tmp_path / "b.jsonl"))
    assert sorted(comparison.ranks) == [f"rank {r}" for r in range(4)]
    step = next(r for r in comparison.ranks["rank 2"] if r.key == "step_ms_p50")
    assert step.verdict == BEYOND and step.better is False and step.change_pct is not None
    assert 15.0 < step.change_pct < 25.0  # 250 -> 300 ms a step


def test_a_finding_that_went_away_is_named_with_its_evidence(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "slow_rank.jsonl", ranks=4, seconds=60.0, knob_at_s=1000.0)
    write_synthetic(tmp_path / "even.jsonl", ranks=4, seconds=60.0, knob_at_s=1000.0, straggler=-1)
    comparison = compare(load(tmp_path / "slow_rank.jsonl"), load(tmp_path / "even.jsonl"))
    gone = [f for f in comparison.findings if f.change == "went away"]
    assert [f.id for f in gone] == ["ranks.straggler"], comparison.findings
    assert any("rank 3" in line for line in gone[0].evidence)
