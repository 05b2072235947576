"""Phases: opened by acknowledged changes, warm-up excluded by the documented rule."""

from __future__ import annotations

import pytest

from gputop_train import events
from gputop_train.session.model import Session
from gputop_train.session.phases import WARMUP_S, WARMUP_STEPS, Phase, PhaseTable, split_warmup
from gputop_train.session.steps import Step
from tests.support.counting import CountingList

PID = 7


def steps_of(first: int, count: int, step_ms: float, t0: float, samples: int = 10) -> list[list]:
    rows, t = [], t0
    for n in range(first, first + count):
        t += step_ms / 1000.0
        rows.append([n, t, step_ms, 1.0, samples, 1, None, None, None, None])
    return rows


def session_with_knob() -> Session:
    session = Session(clock=lambda: 10_000.0, started_at=9_000.0)
    session.apply(events.ProcessHello.of(PID, {"rank": 0}))
    session.apply(
        events.KnobsDeclared(PID, ({"name": "num_workers", "kind": "int", "value": 0, "min": 0},))
    )
    return session


def test_warmup_is_the_first_steps_and_the_first_seconds() -> None:
    slow_start = [
        Step(PID, n, 9000.0 + n * 0.1, 100.0, 0.0, 1, 1, None, None, None, None)
        for n in range(1, 101)
    ]
    warmup, measured = split_warmup(slow_start)
    # 100 ms steps: the first 3 s hold 30 steps, more than WARMUP_STEPS.
    assert len(warmup) == int(WARMUP_S / 0.1) and len(warmup) > WARMUP_STEPS
    assert measured[0].step == len(warmup) + 1
    compile_first = [Step(PID, 1, 9060.0, 60_000.0, 0.0, 1, 1, None, None, None, None)] + [
        Step(PID, n, 9060.0 + n, 1000.0, 0.0, 1, 1, None, None, None, None) for n in range(2, 20)
    ]
    warmup, _ = split_warmup(compile_first)
    assert [s.step for s in warmup] == list(range(1, WARMUP_STEPS + 1))  # compile stays out


def test_an_acknowledged_change_opens_a_phase_with_its_own_figures() -> None:
    session = session_with_knob()
    session.apply(events.StepRows(PID, tuple(steps_of(1, 50, step_ms=100.0, t0=9_000.0))))
    session.apply(
        events.KnobOutcome.of(
            PID,
            {
                "name": "num_workers",
                "ok": True,
                "value": 8,
                "previous": 0,
                "step": 50,
                "t": 9_005.0,
            },
        )
    )
    session.apply(events.StepRows(PID, tuple(steps_of(51, 200, step_ms=25.0, t0=9_005.0))))
    first, second = session.snapshot(with_phases=True).phases
    assert second.phase.change == "num_workers=8" and second.phase.first_step == 51
    assert first.samples_per_s == pytest.approx(100.0)
    assert second.samples_per_s == pytest.approx(400.0)
    assert second.speedup == pytest.approx(4.0)
    assert second.steps + second.warmup_steps == 200


def test_a_refused_change_opens_no_phase_and_keeps_the_error() -> None:
    session = session_with_knob()
    session.apply(events.KnobRequested("num_workers", 99))
    assert session.knob("num_workers").pending == 99
    session.apply(
        events.KnobOutcome.of(
            PID, {"name": "num_workers", "ok": False, "value": 0, "error": "too many", "step": None}
        )
    )
    snap = session.snapshot(with_phases=True)
    assert len(snap.phases) == 1
    assert snap.knobs[0].error == "too many" and snap.knobs[0].pending is None


def test_a_reverted_change_marks_its_phase_failed_and_opens_the_restored_one() -> None:
    session = session_with_knob()
    session.apply(
        events.KnobOutcome.of(
            PID, {"name": "num_workers", "ok": True, "value": 64, "previous": 0, "step": 10}
        )
    )
    session.apply(
        events.KnobOutcome.of(
            PID,
            {
                "name": "num_workers",
                "ok": False,
                "reverted": True,
                "value": 0,
                "error": "OOM",
                "step": 11,
            },
        )
    )
    phases = [row.phase for row in session.snapshot(with_phases=True).phases]
    assert phases[1].failed == "OOM"
    assert phases[2].change == "revert num_workers=0" and phases[2].first_step == 12


def test_a_phase_counts_the_samples_of_every_rank() -> None:
    # Seen on two H200s: the phase table showed one rank's samples/s, the status line both.
    session = session_with_knob()
    rank1 = PID + 1
    session.apply(events.ProcessHello.of(rank1, {"rank": 1}))
    session.apply(events.StepRows(PID, tuple(steps_of(1, 100, step_ms=100.0, t0=9_000.0))))
    session.apply(events.StepRows(rank1, tuple(steps_of(1, 100, step_ms=100.0, t0=9_000.0))))
    (phase,) = session.snapshot(with_phases=True).phases
    assert phase.samples_per_s == pytest.approx(2 * 100.0)  # 10 samples per 100 ms, two ranks
    assert phase.steps == 100 - phase.warmup_steps  # steps are rank 0's


def test_closed_phases_are_kept_and_a_redraw_reads_only_the_open_one() -> None:
    phases = [
        Phase(1, "start", 1, 9_000.0),
        Phase(2, "num_workers=8", 20_001, 9_000.0 + 20_000 * 0.1),
        Phase(3, "pin_memory=True", 40_001, 9_000.0 + 40_000 * 0.1),
    ]
    rows = [
        [n, 9_000.0 + n * 0.1, 100.0, 1.0, 10, 1, None, None, None, None] for n in range(1, 40_101)
    ]
    steps = CountingList(Step.from_row(PID, row) for row in rows)
    table = PhaseTable()
    first = table.rows(phases, steps, [], PID)
    CountingList.walked = 0
    again = table.rows(phases, steps, [], PID)
    assert CountingList.walked < 200  # the open phase's 100 steps, not the run's 40,100
    assert again == first == PhaseTable().rows(phases, steps, [], PID)
    assert [r.speedup for r in again] == [1.0, 1.0, 1.0]


def test_a_closed_phases_row_waits_for_its_last_step_however_late_it_arrives() -> None:
    # A row reaches the monitor once its GPU time is known: the last step of a phase can land
    # after the next phase has run a while (seen on the H200: 230 ms steps, then a 2 s first
    # step with new workers). The kept row must count it.
    session = session_with_knob()
    rows = steps_of(1, 60, step_ms=100.0, t0=9_000.0)
    session.apply(events.StepRows(PID, tuple(rows[:-1])))  # step 60 still waits for its CUDA events
    session.apply(
        events.KnobOutcome.of(
            PID,
            {"seq": 1, "name": "num_workers", "ok": True, "value": 8, "previous": 0, "step": 60},
        )
    )
    early = session.snapshot(with_phases=True).phases[0]
    session.apply(events.StepRows(PID, (rows[-1], *steps_of(61, 5, step_ms=50.0, t0=9_006.0))))
    late = session.snapshot(with_phases=True).phases[0]
    assert late.steps == early.steps + 1
