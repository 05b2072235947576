"""The autopilot and --try on built-in knobs: a finding's change is carried by the script's
knob of its role first, by the hook's built-in one otherwise; a change no knob carries stays
advice; the ledger keeps the predicted and measured gains; a refused change is not measured."""

from __future__ import annotations

from typing import Any

from gputop_train import events
from gputop_train.advise.rules import Change, Finding
from gputop_train.autopilot.pilot import Pilot
from gputop_train.autopilot.plan import candidates
from gputop_train.session.phases import knob_state
from tests.support.simulated_job import KNOBS, SimulatedJob, fly, speeds


def builtin(name: str, role: str, value: Any, **spec: Any) -> dict[str, Any]:
    kind = "choice" if "choices" in spec else "bool" if isinstance(value, bool) else "int"
    return {"name": name, "kind": kind, "value": value, "role": role, "builtin": True, **spec}


AUTOCAST = builtin("autocast", "precision", "off", choices=["off", "bf16"])
COMPILE = builtin("compile", "compile", "off", choices=["off", "default", "reduce-overhead"])
WORKERS = builtin("num_workers", "workers", 2, min=0, max=16)


def finding(*changes: Change, gain: float = 2.0) -> Finding:
    return Finding("f.id", "title", (), "edit the script", f"up to {gain}x", 0.9, gain, changes)


def test_a_declared_knob_of_the_role_carries_the_change_before_the_builtin() -> None:
    knobs = [knob_state(k) for k in [WORKERS, *KNOBS]]  # the built-in listed first
    found = candidates([finding(Change("workers", 8))], [k for k in knobs if k], None)
    assert [c.settings for c in found] == [(("num_workers", 8),)]
    declared = next(k for k in knobs if k and k.name == "num_workers" and not k.builtin)
    assert declared.value == 0  # the script's knob: its value is what the candidate replaces
    assert found[0].previous == (("num_workers", 0),)


def test_builtins_carry_what_no_declared_knob_does_and_compile_true_is_the_default_mode() -> None:
    knobs = [k for k in map(knob_state, [AUTOCAST, COMPILE]) if k]
    found = candidates(
        [finding(Change("precision", "bf16")), finding(Change("compile", True), gain=1.3)],
        knobs,
        None,
    )
    assert [(c.label, c.predicted_gain) for c in found] == [
        ("autocast=bf16", 2.0), ("compile=default", 1.3),
    ]  # fmt: skip


def test_an_unavailable_builtin_carries_nothing_and_the_action_stays_advice() -> None:
    knobs = [k for k in map(knob_state, [{**AUTOCAST, "unavailable": "the script enters it"}]) if k]
    assert candidates([finding(Change("precision", "bf16"))], knobs, None) == []


def test_a_finding_no_knob_carries_stops_the_autopilot_saying_what_to_edit() -> None:
    job = SimulatedJob(speeds())
    action = "use F.scaled_dot_product_attention"
    sdpa = Finding("gpu.attention", "hand-written attention", (), action, None, 0.9, 1.5)
    pilot = Pilot(job.session, job.request, 5.0, clock=job.clock, advise=lambda o: [sdpa])
    fly(job, pilot)
    assert pilot.status().stopped_because == (
        "no knob, declared or built-in, can carry what is left: edit the script "
        "(gpu.attention: use F.scaled_dot_product_attention)"
    )
    (edit,) = pilot.status().edits_left  # and the ledger lists it
    assert (edit.finding, edit.action) == ("gpu.attention", action)


def test_a_try_that_was_refused_is_not_called_measured() -> None:
    job = SimulatedJob(speeds(num_workers__8=0.5))
    tries = [(("nosuchknob", "4"),), (("num_workers", "8"),)]
    pilot = Pilot(job.session, job.request, 5.0, tries=tries, clock=job.clock)
    fly(job, pilot)
    status = pilot.status()
    assert [t.decision for t in status.trials] == ["refused", "measured"]
    assert status.stopped_because.startswith(
        "1 of 2 requested changes measured; nosuchknob=4 refused: no knob named 'nosuchknob' "
        "(this job's knobs: "
    )


def test_a_knob_the_script_declares_after_its_first_steps_is_tried_not_refused() -> None:
    # Only the hook's own knobs at first (the script sizes its batch by training, then
    # declares its knobs): the unknown name is said at once and tried once declared.
    job = SimulatedJob(speeds(num_workers__8=0.5), declare=False)
    builtin = {"name": "cudnn_benchmark", "kind": "bool", "value": False, "builtin": True}
    job.declare_knobs([builtin])
    pilot = Pilot(job.session, job.request, 5.0, tries=[(("num_workers", "8"),)], clock=job.clock)
    job.run(1.0)
    pilot.tick()
    assert not pilot.status().trials  # not refused before the script could declare it
    notices = job.session.snapshot(5.0).notices
    assert any("--try num_workers=8: no knob named 'num_workers'" in n for n in notices)
    job.declare_knobs()
    fly(job, pilot)
    assert [t.decision for t in pilot.status().trials] == ["measured"]


def test_a_wrong_knob_or_value_is_refused_as_soon_as_the_knobs_are_known() -> None:
    job = SimulatedJob(speeds(num_workers__8=0.5))
    tries = [(("nosuchknob", "4"),), (("num_workers", "lots"),)]
    pilot = Pilot(job.session, job.request, 5.0, tries=tries, clock=job.clock)
    job.run(1.0)  # a few steps: the knobs are known, no baseline measured yet
    pilot.tick()
    status = pilot.status()
    assert status.done and [t.decision for t in status.trials] == ["refused", "refused"]
    assert status.elapsed_s < 2.0  # not after a baseline of half a minute
    reasons = " ".join(t.reason for t in status.trials)
    assert "no knob named 'nosuchknob'" in reasons and "num_workers takes a whole number" in reasons
    assert "num_workers (" in reasons  # the valid knobs and their values are listed
    assert not job._queue  # nothing was sent to the job


def test_the_ledger_keeps_the_predicted_gain_and_the_kept_set_against_the_start() -> None:
    job = SimulatedJob(speeds(num_workers__8=0.5, precision__bf16=0.8))
    found = [
        finding(Change("workers", 8), gain=3.0),
        Finding("g.prec", "t", (), "a", None, 0.5, 1.2, (Change("precision", "bf16"),)),
    ]
    pilot = Pilot(job.session, job.request, 5.0, clock=job.clock, advise=lambda o: found)
    fly(job, pilot)
    trials = pilot.status().trials
    assert [(t.change, t.decision, t.predicted_gain) for t in trials] == [
        ("num_workers=8", "kept", 3.0), ("precision=bf16", "kept", None),
    ]  # fmt: skip
    # 100 ms -> 50 ms -> 40 ms a step: each gain over its own baseline, and the last kept
    # phase over the first baseline (measured, not 2.0 x 1.25 multiplied).
    assert [round(t.gain or 0, 2) for t in trials] == [2.0, 1.25]
    assert [round(t.gain_vs_start or 0, 2) for t in trials] == [2.0, 2.5]
    assert round(pilot.status().gain_vs_start or 0, 2) == 2.5


def test_a_job_under_the_autopilot_trains_on_until_the_monitor_says_it_is_done(
    monkeypatch: Any,
) -> None:
    import os

    import pytest

    torch = pytest.importorskip("torch")
    from gputop_train import hook, wire
    from gputop_train.hook import patches
    from gputop_train.hook.agent import Agent

    agent = Agent(torch)
    monkeypatch.setitem(patches._state, "agent", agent)
    monkeypatch.setenv(wire.MONITOR_PID_ENV, str(os.getpid()))
    assert not hook.autopilot_active()  # not launched under --autopilot
    monkeypatch.setenv(wire.AUTOPILOT_ENV, "1")
    assert hook.autopilot_active()
    agent.on_frame({"type": wire.AUTOPILOT_DONE})
    assert not hook.autopilot_active()
    agent.autopilot_done = False
    monkeypatch.setenv(wire.MONITOR_PID_ENV, "999999999")  # the monitor is gone
    assert not hook.autopilot_active()


def test_a_job_whose_samples_are_unknown_is_judged_by_its_steps_per_second() -> None:
    job = SimulatedJob(speeds(num_workers__8=0.5))
    original = job.session.apply

    def without_samples(event: Any) -> Any:
        if isinstance(event, events.StepRows):  # no samples column
            event = events.StepRows(event.pid, tuple([*r[:4], None, *r[5:]] for r in event.rows))
        return original(event)

    job.session.apply = without_samples  # type: ignore[method-assign, assignment]
    tries = [(("num_workers", "8"),)]
    pilot = Pilot(job.session, job.request, 5.0, tries=tries, clock=job.clock)
    fly(job, pilot)
    (trial,) = pilot.status().trials
    assert trial.unit == "steps/s" and trial.decision == "measured"
    assert round(trial.gain or 0, 2) == 2.0  # 100 ms -> 50 ms a step


def test_a_schedule_entry_for_a_knob_not_declared_yet_says_so_far() -> None:
    from gputop_train.autopilot.pilot import schedule_problems

    job = SimulatedJob(speeds(), declare=False)
    job.declare_knobs(
        [{"name": "cudnn_benchmark", "kind": "bool", "value": False, "builtin": True}]
    )
    schedule = [(100, {"num_workers": "8"})]
    ((name, problem),) = schedule_problems(job.session.snapshot(5.0), schedule)
    assert name == "num_workers"
    assert "no knob named 'num_workers' so far (the script may declare it)" in problem
    job.declare_knobs()  # declared: a wrong value is wrong for good
    ((_, problem),) = schedule_problems(job.session.snapshot(5.0), [(100, {"num_workers": "lots"})])
    assert "so far" not in problem and "num_workers takes a whole number" in problem
