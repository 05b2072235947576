"""A loader with no workers, starved of CPU by other processes (issue 46): the training
process's own run-queue wait is read, the advice says the cores are held (never "storage,
network, a sleep"), more workers are proposed within the cores and the knob's range, and a
change the autopilot measured and took back stops promising its gain."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gputop_train import events
from gputop_train.advise import rules
from gputop_train.collect.fake import FakeProcess, FakePsutil
from gputop_train.collect.procs import ProcessSampler
from gputop_train.samples import ProcSample
from gputop_train.session import observe as observing
from gputop_train.session.model import Session
from gputop_train.tables import PhaseLine
from gputop_train.views import ledger_lines, view_of
from tests.support.clock import ManualClock
from tests.support.observations import FP32_H100, RUNG0, headline, ids, observe
from tests.support.sessions import scripted_session

# The case on the 2-core dev box beside 2 CPU hogs: no workers, the training process
# (which loads every batch) runs 35% of a core and waits 65% of one for a CPU; the job holds
# 0.4 cores, other processes the rest; a CPU job (the demo on the CPU).
STARVED_MAIN = dict(
    RUNG0,
    step_data_wait_pct=60.0,
    workers=0,
    main_cpu_pct=35.0,
    main_run_wait_pct=65.0,
    job_cpu_pct=40.0,
    system_cpu_pct=100.0,
    cpu_count=2,
    model=replace(FP32_H100, cuda=False),
    gpu_name=None,
    batch_shape=(32, 128),
    batch_dtype="torch.float32",
)


def test_a_starved_training_process_is_told_the_cores_are_held_not_storage() -> None:
    o = observe(**STARVED_MAIN)
    finding = headline(o)
    assert "other processes hold the cores" in finding.title, finding
    text = " ".join([finding.action, *finding.evidence])
    assert "storage" not in text and "sleep" not in text
    assert "waiting 65% of a core for a CPU" in text and "starved" in text
    assert "give the job cores of its own" in finding.action
    # With cores of its own the input runs (35 + 65) / 35 = 2.9x faster; the step loses at
    # most its 60% wait, 2.5x: at least the smaller.
    assert finding.expected_gain == "at least 2.5x" and finding.gain == pytest.approx(2.5)
    # With the cores as they are: one worker beside the training process on 2 cores.
    assert finding.changes[0] == rules.Change("workers", 1)
    assert "one worker per core beside the training process at most: num_workers 1" in (
        finding.action
    )
    assert "input.more_workers" not in ids(o)


def test_a_training_process_that_sleeps_beside_the_hogs_still_gets_workers_for_its_waits() -> None:
    # The same CPU share with little run-queue wait: it sleeps (storage), it does not compute.
    o = observe(**{**STARVED_MAIN, "main_run_wait_pct": 3.0})
    finding = headline(o)
    assert finding.id == "input.more_workers"
    assert "storage" in " ".join(finding.evidence)


def test_proposed_workers_stay_within_the_workers_knobs_range() -> None:
    sleeping = {**STARVED_MAIN, "main_run_wait_pct": 3.0}
    unbounded = headline(observe(**sleeping))
    assert unbounded.changes[0].value > 2  # up to 4 per core for waits that are not CPU
    capped = headline(observe(**sleeping, workers_max=2))
    assert capped.changes[0] == rules.Change("workers", 2)
    assert "num_workers to 2" in capped.action
    # A knob already at its end: no proposal of more workers at all.
    at_end = observe(**{**sleeping, "workers": 2, "worker_cpu_pct": 5.0}, workers_max=2)
    assert all(
        change.role != "workers" or change.value <= 2
        for finding in rules.findings(at_end)
        for change in finding.changes
    )
    busy = dict(RUNG0, workers=4, worker_cpu_pct=95.0, system_cpu_pct=30.0)
    assert "input.more_workers" in ids(observe(**busy))
    assert "input.more_workers" not in ids(observe(**busy, workers_max=4))


def test_the_sampler_reads_the_training_processs_run_queue_wait_too() -> None:
    clock = ManualClock(0.0)
    waited = {10: 0, 11: 0}
    psutil = FakePsutil(
        [
            FakeProcess(10, 1, "python", cpu=35.0),
            FakeProcess(11, 10, "pt_data_worker_0", cpu=40.0),
        ]
    )
    sampler = ProcessSampler(10, psutil_module=psutil, clock=clock, read_run_wait=waited.get)
    sampler.sample()
    clock.advance(2.0)
    waited.update({10: 1_300_000_000, 11: 200_000_000})
    by_pid = {p.pid: p for p in sampler.sample()}
    assert by_pid[10].role == "main" and by_pid[10].run_wait_pct == 65.0
    assert by_pid[11].run_wait_pct == 10.0


def _session_with_knob(knobs: list[dict[str, Any]]) -> Session:
    clock = ManualClock(100.0)
    session = Session(clock=clock)
    session.apply(events.CoresCounted(2))
    session.apply(events.ProcessHello.of(21, {"rank": None}))
    session.apply(events.KnobsDeclared(21, tuple(knobs)))
    for _ in range(3):
        clock.advance(1.0)
        tree = (ProcSample(21, 1, "python", "main", 35.0, None, None, None, "running", 65.0),)
        session.apply(events.ProcsSampled(tree, 100.0, usable_cores=2.0))
    return session


BUILTIN = {"name": "num_workers", "kind": "int", "value": 0, "min": 0, "max": 2}


def test_the_session_gives_the_advisor_the_main_wait_and_the_knobs_range() -> None:
    builtin = {**BUILTIN, "role": "workers", "builtin": True}
    session = _session_with_knob([builtin])
    o = observing.observe(session._series(), [], [], 100.0, 104.0)
    assert o.main_run_wait_pct == 65.0 and o.worker_run_wait_pct is None
    assert o.workers_max == 2
    # The script's own knob of the role carries the change before the built-in one.
    script = {**BUILTIN, "name": "workers", "max": 256, "role": "workers"}
    session = _session_with_knob([builtin, script])
    assert observing.observe(session._series(), [], [], 100.0, 104.0).workers_max == 256


def _with_trials(trials: list[dict[str, Any]]) -> Any:
    snap = scripted_session().snapshot(with_phases=True)
    pilot = {"mode": "autopilot", "unit": "samples/s", "trials": trials}
    return replace(snap, autopilot=pilot)


def test_a_finding_whose_change_the_autopilot_reverted_says_so_and_promises_nothing() -> None:
    snap = scripted_session().snapshot(with_phases=True)
    found = view_of(snap).headline
    assert found is not None and found.expected_gain
    trial = {
        "change": "num_workers=4",
        "source": found.id,
        "decision": "reverted",
        "reason": "0.98x < 1.05x: does not pay",
        "gain": 0.98,
        "phase": 2,
        "baseline_phase": 1,
    }
    after = view_of(replace(snap, autopilot={"mode": "autopilot", "trials": [trial]})).headline
    assert after is not None and after.id == found.id
    assert after.expected_gain == "num_workers=4 measured 0.98x and reverted (autopilot)"
    assert "up to" not in after.expected_gain and "the autopilot tried" in after.action
    # Tried again later and under way: the finding is its own again.
    again = {**trial, "decision": "trying", "gain": None}
    pilot = {"mode": "autopilot", "trials": [trial, again]}
    assert view_of(replace(snap, autopilot=pilot)).headline == found


def test_the_phase_table_and_the_ledger_read_one_figure_for_one_phase() -> None:
    base = scripted_session().snapshot(with_phases=True)
    assert len(base.phases) >= 2
    trial = {
        "change": "x=1",
        "source": "input.more_workers",
        "decision": "reverted",
        "reason": "0.72x < 1.05x: does not pay",
        "baseline_phase": 1,
        "baseline_samples_per_s": 100.0,
        "phase": 2,
        "samples_per_s": 72.0,
        "gain": 0.72,
    }
    view = view_of(_with_trials([trial]))
    lines = PhaseLine.of_view(view)
    assert (lines[0].samples_per_s, lines[1].samples_per_s) == (100.0, 72.0)
    assert lines[1].speedup == pytest.approx(0.72)
    assert any(
        "x=1 (phase 2 against phase 1): 0.72x" in line for line in ledger_lines(view.snap.autopilot)
    )
    # A phase the autopilot did not judge keeps its row's own figure.
    if len(base.phases) > 2:
        assert lines[2].samples_per_s == base.phases[2].samples_per_s
