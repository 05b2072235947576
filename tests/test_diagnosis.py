"""The diagnosis benchmark's verdicts, and corpus scenarios run on the CPU under the real hook
and monitor, with a (fake) GPU on the machine that the job does not use."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.advise.rules import findings
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.job.launched import hook_environment
from gputop_train.monitor.monitor import Monitor
from gputop_train.session.model import Session
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from diagnosis import carries, judge

SCENARIOS = REPO / "benchmarks" / "scenarios"


def summary(headline: dict | None, trials: list[tuple[str, float]], roles: dict) -> dict:
    """A run's summary: phase 1 (baseline at 100/s) with ``headline``, then each trial's
    phase and a baseline phase after it at 100/s."""
    phases = [{"phase": 1, "samples_per_s": 100.0, "findings": [headline] if headline else []}]
    recorded = []
    for change, gain in trials:
        trial_phase = len(phases) + 1
        phases += [
            {"phase": trial_phase, "samples_per_s": 100.0 * gain, "findings": []},
            {"phase": trial_phase + 1, "samples_per_s": 100.0, "findings": []},
        ]
        recorded.append({"change": change, "phase": trial_phase, "baseline_phase": trial_phase - 1})
    return {"phases": phases, "autopilot": {"trials": recorded}, "knob_roles": roles}


def finding(id_: str, *changes: tuple[str, object], rules_out: tuple[str, ...] = ()) -> dict:
    return {
        "id": id_,
        "changes": [{"role": r, "value": v} for r, v in changes],
        "rules_out": list(rules_out),
    }


ROLES = {"num_workers": "workers", "input": "input_format", "precision": "precision"}


def test_a_headline_whose_change_is_the_measured_best_is_right() -> None:
    headline = finding("input.more_workers", ("workers", 15))
    outcome = judge("s", summary(headline, [("num_workers=15", 3.1), ("input=uint8", 1.4)], ROLES))
    assert outcome.verdict == "right" and outcome.best == "num_workers=15"


def test_a_headline_within_ten_percent_of_the_best_is_still_right() -> None:
    headline = finding("input.uint8", ("input_format", "uint8"))
    trials = [("num_workers=15", 1.50), ("input=uint8", 1.40)]
    assert judge("s", summary(headline, trials, ROLES)).verdict == "right"
    trials = [("num_workers=15", 1.60), ("input=uint8", 1.40)]
    assert judge("s", summary(headline, trials, ROLES)).verdict.startswith("wrong")


def test_a_choice_is_carried_only_by_the_same_value() -> None:
    gpu = {"role": "input_format", "value": "gpu"}
    assert carries(gpu, "input=gpu-resize", "input_format") and carries(
        gpu, "input=gpu", "input_format"
    )
    assert not carries(gpu, "input=uint8", "input_format")
    assert not carries({"role": "workers", "value": 8}, "input=gpu", "input_format")


def test_healthy_is_right_only_when_nothing_gains_ten_percent() -> None:
    healthy = finding("gpu.bound")
    assert judge("s", summary(healthy, [("precision=bf16", 1.05)], ROLES)).verdict == (
        "right (healthy)"
    )
    busy = finding("input.more_workers", ("workers", 8))
    assert "wrong" in judge("s", summary(busy, [("num_workers=8", 1.02)], ROLES)).verdict


def test_a_will_not_help_claim_is_contradicted_by_a_gain() -> None:
    saturated = finding("input.gpu_preprocessing", ("input_format", "gpu"), rules_out=("workers",))
    trials = [("num_workers=32", 1.3), ("input=gpu", 4.0)]
    outcome = judge("s", summary(saturated, trials, ROLES))
    assert outcome.verdict == "right" and outcome.contradictions
    assert "workers will not help" in outcome.contradictions[0]


def monitored_headline(script: str, *args: str, seconds: float = 25.0) -> list:
    """Run a corpus scenario (CPU-sized) under the hook, with the monitor's samplers: psutil
    for real, NVML faked with an idle H100 beside the job. The findings of its last window."""
    job = subprocess.Popen(
        [sys.executable, str(SCENARIOS / script), "--seconds", str(seconds), *args],
        env=hook_environment(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    session = Session(command=(script,))
    monitor = Monitor(session, job.pid, nvml=FakeNvml([FakeGpu(util=3, mem_used=2**30)]))
    monitor.start()
    try:
        job.wait(timeout=seconds + 60)
        monitor.drain(3.0)
        session.apply(events.JobEnded(job.returncode))
    finally:
        monitor.stop()
        if job.poll() is None:
            job.kill()
    return findings(session.snapshot().observation)


@pytest.mark.torch
def test_a_cpu_job_beside_a_gpu_gets_input_advice_that_never_blames_the_gpu() -> None:
    pytest.importorskip("torchvision")
    found = monitored_headline("input_idle_cores.py", "--workers", "0")
    assert found and found[0].id in ("input.more_workers", "input.uint8")
    text = " ".join(f.title + f.action for f in found)
    assert "the GPU" not in text and "pin_memory" not in text


@pytest.mark.torch
def test_one_busy_worker_per_core_is_saturation_on_any_machine() -> None:
    pytest.importorskip("torchvision")
    cores = os.cpu_count() or 1
    found = monitored_headline("input_all_cores_busy.py", "--workers", str(cores))
    assert found[0].id == "input.uint8" and found[0].rules_out == ("workers",)
    assert f"{cores} workers on {cores} cores" in " ".join(found[0].evidence)
    assert "input.more_workers" not in [f.id for f in found]


def test_the_scorecard_is_written_with_machine_date_and_command(tmp_path: Path) -> None:
    from diagnosis import Outcome, scorecard

    outcome = Outcome("s", "gpu.bound", [], {"compile=true": 1.01}, {}, "compile=true", "right")
    text = scorecard([outcome], "H200", "python benchmarks/diagnosis.py", time.strftime("%F"))
    assert "- machine: H200" in text and "right on **1 of 1**" in text
