"""What the advisor judges: the measured steps of one configuration, and the GPU and CPU
figures of the time they ran (not start-up, not after the last step, not warm-up)."""

from __future__ import annotations

from gputop_train import events
from gputop_train.samples import GpuSample, ProcSample
from gputop_train.session.model import Session
from gputop_train.session.observe import MIN_ADVICE_STEPS
from gputop_train.session.phases import WARMUP_STEPS
from tests.support.clock import ManualClock

PID = 100
T0 = 1_000_000.0


def session_at(t: float) -> tuple[Session, ManualClock]:
    clock = ManualClock(t)
    session = Session(command=("python", "train.py"), clock=clock, started_at=t)
    session.apply(events.CoresCounted(16))
    session.apply(events.ProcessHello.of(PID, {"rank": None, "argv": ["train.py"]}))
    return session, clock


def gpu(t: float, sm: float) -> tuple[GpuSample, ...]:
    return (
        GpuSample(index=0, t=t, util_pct=sm, sm_active_pct=sm, mem_used_bytes=1, mem_total_bytes=8),
    )


def steps(first: int, count: int, start: float, step_ms: float = 100.0) -> list[list]:
    rows, t = [], start
    for step in range(first, first + count):
        t += step_ms / 1000.0
        rows.append([step, t, step_ms, 10.0, 32, 1, 90.0, None, None, None])
    return rows


def workers(cpu: float, count: int = 4) -> tuple[ProcSample, ...]:
    main = ProcSample(PID, 1, "python", "main", 50.0, None, None, None, "running")
    kids = tuple(
        ProcSample(PID + i, PID, "pt_data_worker", "worker", cpu, None, None, None, "running")
        for i in range(1, count + 1)
    )
    return (main, *kids)


def test_gpu_figures_cover_the_steps_not_the_start_up_before_them() -> None:
    # A short run: 8 s of start-up with the GPU idle (SM 0%), then 4 s of steps at SM 90%.
    session, clock = session_at(T0)
    for i in range(80):
        clock.now = T0 + i * 0.1
        session.apply(events.GpuSampled(gpu(clock.now, 0.0)))
    session.apply(events.StepRows(PID, tuple(steps(1, 40, T0 + 8.0))))
    for i in range(80, 120):
        clock.now = T0 + i * 0.1
        session.apply(events.GpuSampled(gpu(clock.now, 90.0)))
    clock.now = T0 + 12.0
    snap = session.snapshot(window_s=30.0)
    assert snap.gpu.sm_active_pct < 50.0  # the shown window has the idle start-up
    assert snap.observation.gpu.sm_active_pct == 90.0  # the advisor's has the steps only
    assert snap.observation.window_s < 4.0


def test_a_finished_run_keeps_its_final_window_and_the_workers_that_fed_it() -> None:
    session, clock = session_at(T0)
    for i in range(10):
        clock.now = T0 + 1.0 + i
        session.apply(events.ProcsSampled(workers(95.0), system_cpu_pct=40.0))
    session.apply(events.StepRows(PID, tuple(steps(1, 100, T0))))
    clock.now = T0 + 12.0
    session.apply(
        events.ProcsSampled(workers(0.0, count=0), system_cpu_pct=1.0)
    )  # the workers exited
    session.apply(events.JobEnded(0))
    clock.now = T0 + 60.0  # long after: the live window would be empty
    snap = session.snapshot(window_s=10.0)
    assert snap.steps.steps > 0 and snap.steps.samples_per_s is not None
    assert snap.observation.workers == 4 and snap.observation.worker_cpu_pct == 95.0


def test_too_few_measured_steps_are_not_judged_and_the_screen_says_why() -> None:
    session, clock = session_at(T0)
    session.apply(events.StepRows(PID, tuple(steps(1, WARMUP_STEPS, T0))))  # all of them warm-up
    clock.now = T0 + 1.0
    snap = session.snapshot()
    assert snap.observation is None and "warming up" in snap.advice_wait
    session.apply(events.StepRows(PID, tuple(steps(WARMUP_STEPS + 1, MIN_ADVICE_STEPS, T0 + 1.0))))
    clock.now = T0 + 1.5
    snap = session.snapshot()  # 5 measured steps, but 0.5 s of them
    assert snap.observation is None and "needs 2 s of measured steps" in snap.advice_wait


def test_after_a_knob_change_only_the_new_configurations_measured_steps_count() -> None:
    session, clock = session_at(T0)
    session.apply(events.KnobsDeclared(PID, ({"name": "workers", "kind": "int", "value": 0},)))
    session.apply(events.StepRows(PID, tuple(steps(1, 100, T0, step_ms=100.0))))  # 10 s at 100 ms
    session.apply(
        events.KnobOutcome.of(
            PID, {"seq": 1, "name": "workers", "ok": True, "value": 8, "previous": 0, "step": 100}
        )
    )
    session.apply(events.StepRows(PID, tuple(steps(101, 4, T0 + 10.0, step_ms=50.0))))  # warm-up
    clock.now = T0 + 10.2
    assert "warming up" in session.snapshot().advice_wait
    session.apply(events.StepRows(PID, tuple(steps(105, 100, T0 + 10.2, step_ms=50.0))))
    clock.now = T0 + 15.2
    observation = session.snapshot(window_s=10.0).observation
    assert observation.steps.step_ms_p50 == 50.0  # none of the old configuration's steps


def test_the_advisor_judges_the_same_step_figures_whether_the_window_is_all_measured_or_not() -> (
    None
):
    # The window's figures are reused for the advisor's when every step in it is measured
    # (one process, past warm-up); with warm-up steps in the window they are computed apart.
    from gputop_train.session import stats
    from gputop_train.session.steps import Step

    session, clock = session_at(T0)
    rows = steps(1, WARMUP_STEPS, T0, step_ms=300.0)
    rows += steps(WARMUP_STEPS + 1, 200, rows[-1][1], step_ms=50.0)
    for row, step_ms in zip(rows[WARMUP_STEPS:], [40.0, 60.0] * 100, strict=True):
        row[2] = step_ms  # measured steps of two lengths: a p50 and a p95 apart
    session.apply(events.StepRows(PID, tuple(rows)))
    measured = [s for row in rows[WARMUP_STEPS:] if (s := Step.from_row(PID, row)) is not None]
    for window_s, warmup_inside in ((5.0, False), (60.0, True)):
        clock.now = rows[-1][1]
        snap = session.snapshot(window_s=window_s)
        inside = [s for s in measured if s.t > clock.now - window_s]
        assert snap.observation.steps == stats.step_stats(inside, PID)
        assert (snap.steps != snap.observation.steps) is warmup_inside
