"""The diagnosis benchmark's verdicts, and corpus scenarios run on the CPU under the real hook
and monitor, with a (fake) GPU on the machine that the job does not use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from benchmarks.diagnosis.scorecard import Outcome, carries, judge, scorecard
from gputop_train import events
from gputop_train.advise.rules import findings
from gputop_train.collect.fake import FakeGpu, FakeNvml, FakeProcess, FakePsutil
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.collect.procs import ProcessSampler
from gputop_train.session.model import Session
from tests.support.clock import ManualClock
from tests.support.diagnosis_runs import ROLES, finding, summary
from tests.support.scenario_runs import hooked_scenario


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


# The advisor must have had a finding this long before a test reads it: its verdict on a steady
# job, not one window's (a loaded machine only makes the wait longer).
SETTLED_S = 3.0


def monitored_headline(script: str, *args: str, timeout_s: float = 200.0) -> list:
    """Run a corpus scenario (CPU-sized) under the hook, with the monitor's samplers: psutil
    for real, NVML faked with an idle H100 beside the job. The findings once the advisor has
    had one for SETTLED_S, however long the machine takes to get there (a fixed run length gave
    no finding at all on a busy 2-core box)."""
    with hooked_scenario(script, "--seconds", str(timeout_s + 30), *args) as run:
        deadline = time.monotonic() + timeout_s
        since = None  # when the advisor's findings began, this time
        while True:
            assert run.job.poll() is None, f"{script} ended before the advisor settled"
            assert time.monotonic() < deadline, f"no settled finding in {timeout_s:g} s"
            found = findings(run.session.snapshot().observation)
            now = time.monotonic()
            if not found:
                since = None
            elif since is None:
                since = now
            elif now - since >= SETTLED_S:
                return found
            time.sleep(0.5)


@pytest.mark.torch
@pytest.mark.timeout(300)  # monitored_headline waits for the advisor, however slow the box
def test_a_cpu_job_beside_a_gpu_gets_input_advice_that_never_blames_the_gpu() -> None:
    pytest.importorskip("torchvision")
    found = monitored_headline("input_idle_cores.py", "--workers", "0")
    assert found and found[0].id in ("input.more_workers", "input.uint8")
    text = " ".join(f.title + f.action for f in found)
    assert "the GPU" not in text and "pin_memory" not in text


@pytest.mark.torch
def test_one_busy_worker_per_core_is_saturation_on_any_machine() -> None:
    # What input_all_cores_busy.py shows on an idle machine, scripted through the real
    # session, process sampler and advisor: one DataLoader worker per core of this machine,
    # each busy, the step waiting on them, an idle GPU beside the job. Run for real, a busy
    # machine starved the workers (5% CPU each) and the scenario's premise did not hold.
    cores, pid = os.cpu_count() or 1, 4242
    clock = ManualClock(1_800_000_000.0)
    session = Session(command=("input_all_cores_busy.py",), clock=clock, started_at=clock.now)
    session.apply(events.CoresCounted(cores))
    session.apply(events.ProcessHello.of(pid, {"rank": None, "argv": ["input_all_cores_busy.py"]}))
    loader = {"num_workers": cores, "pin_memory": False, "batch_size": 16, "pinned": False}
    batches = {"dtype": "torch.float32", "shape": [16, 3, 112, 112], "bytes": 2408448}
    session.apply(events.FactSeen.of(pid, {"type": "loader", **loader, **batches}))
    model = {"cuda": False, "capability": None, "autocast": "off", "param_dtype": "float32"}
    precision = {"tf32_matmul": False, "tf32_cudnn": True, "channels_last": False}
    facts = {"type": "model", "step": 1, **model, **precision, "compiled": False}
    session.apply(events.FactSeen.of(pid, facts))
    gpus = NvmlSampler(FakeNvml([FakeGpu(util=3, mem_used=2**30)]), clock=clock, wall_clock=clock)
    session.apply(events.GpusFound(tuple(gpus.open())))
    rows = []
    for step in range(1, 301):  # 30 s at 10 steps/s, 45% of each step waiting for a batch
        clock.now += 0.1
        rows.append([step, clock.now, 100.0, 45.0, 16, 1, None, None, None, None])
        session.apply(events.GpuSampled(gpus.sample()))
    session.apply(events.StepRows(pid, tuple(rows)))
    workers = [FakeProcess(pid + i, pid, "pt_data_worker", cpu=97.0) for i in range(1, cores + 1)]
    psutil = FakePsutil([FakeProcess(pid, 1, "python3", cpu=30.0), *workers], system_cpu_pct=99.0)
    processes = ProcessSampler(pid, session.hooked_pids, psutil, clock=clock)
    processes.sample()
    clock.now += 1.0
    session.apply(events.ProcsSampled(processes.sample(), processes.system_cpu_pct))
    found = findings(session.snapshot().observation)
    assert found[0].id == "input.uint8" and found[0].rules_out == ("workers",)
    assert f"{cores} workers on {cores} cores" in " ".join(found[0].evidence)
    assert "input.more_workers" not in [f.id for f in found]


def test_the_scorecard_is_written_with_machine_date_and_command(tmp_path: Path) -> None:
    outcome = Outcome("s", "gpu.bound", [], {"compile=true": 1.01}, {}, "compile=true", "right")
    command = "python benchmarks/diagnosis/scorecard.py"
    text = scorecard([outcome], "H200", command, time.strftime("%F"))
    assert "- machine: H200" in text and "right on **1 of 1**" in text
