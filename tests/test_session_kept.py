"""What the session keeps between snapshots (issue 47 point 7): each GPU's window figures,
each step's verdict figures, and a whole snapshot while nothing comes. Kept or not, a
snapshot holds the figures a fresh session would give; a changed input is never read from
what was kept."""

from __future__ import annotations

from dataclasses import replace

from gputop_train import events
from gputop_train.samples import GpuSample
from gputop_train.session import comm, gpu_table, step_log
from gputop_train.session.gpu_windows import GpuWindows
from gputop_train.session.model import Session
from tests.support.clock import ManualClock

START = 1000.0
PIDS = (501, 502)


def gpu_tick(t: float, util: float = 80.0) -> tuple[GpuSample, ...]:
    return tuple(
        GpuSample(
            i,
            t,
            "NVIDIA H100",
            util_pct=util - i,
            mem_used_bytes=(60 + i) * 2**30,
            mem_total_bytes=80 * 2**30,
            power_w=500.0 + i,
            sm_clock_mhz=1980.0,
            sm_clock_max_mhz=1980.0,
            throttle=("sw_power_cap",) if i == 3 else (),
            temp_c=60.0 + i,
        )
        for i in range(8)
    )


def step_row(step: int, t: float) -> list[object]:
    """step, t, step_ms, data_ms, samples, batches, gpu_ms, mem x3, comm_ms."""
    return [step, t, 20.0 + step % 3, 5.0, 32, 1, None, None, None, None, 2.0 + step % 5]


def feed(session: Session, clock: ManualClock, seconds: float, first_step: int) -> int:
    """``seconds`` of a job of two ranks at 20 steps/s each, NVML at 2 Hz: events only."""
    step = first_step
    for _ in range(round(seconds * 10)):
        clock.advance(0.1)
        for pid in PIDS:
            rows = tuple(step_row(step + k, clock.now) for k in range(2))
            session.apply(events.StepRows(pid, rows))
        step += 2
        tenth = round((clock.now - START) * 10)  # the same events however the run is cut
        if tenth % 5 == 0:
            session.apply(events.GpuSampled(gpu_tick(clock.now, 80.0 + tenth % 7)))
    return step


def started() -> tuple[Session, ManualClock]:
    clock = ManualClock(START)
    session = Session(command=("python", "train.py"), clock=clock, started_at=START)
    session.apply(events.CoresCounted(8))
    session.apply(events.GpusFound(("NVIDIA H100",) * 8, uuids=tuple(f"GPU-{i}" for i in range(8))))
    for rank, pid in enumerate(PIDS):
        session.apply(events.ProcessHello(pid, ("train.py",), rank=rank, world_size=2))
    return session, clock


def test_a_gpu_window_is_computed_once_and_again_when_its_samples_change() -> None:
    windows = GpuWindows()
    ticks = [gpu_tick(START + i * 0.5) for i in range(20)]
    samples = [tick[2] for tick in ticks]
    first = windows(samples)
    assert first == gpu_table.over_window(samples)
    assert windows(list(samples)) is first  # the same samples, in another list: kept
    assert windows.computed == 1
    moved = [*samples[1:], gpu_tick(START + 10.0, 50.0)[2]]  # the next NVML tick came
    assert windows(moved) == gpu_table.over_window(moved) != first
    assert windows.computed == 2
    grown = [*samples, moved[-1]]  # the same first sample, one more: another window
    assert windows(grown) == gpu_table.over_window(grown) != first
    assert windows.computed == 3
    alike = [replace(s) for s in samples]  # equal values, other samples: not taken for them
    assert windows(alike) == first and windows.computed == 4


def test_each_steps_figures_are_built_once_and_let_go_when_no_window_asks_for_them() -> None:
    steps, _ = step_log.parse(501, [step_row(i, START + i * 0.05) for i in range(1, 201)])
    kept = comm.KeptFigures()
    window = steps[:100]
    assert comm.figures_by_pid(window, [501], kept) == comm.figures_by_pid(window, [501])
    assert kept.built == 100
    comm.figures_by_pid(window, [501], kept)
    assert kept.built == 100  # nothing new: every figure kept
    comm.figures_by_pid(steps[1:101], [501], kept)  # the window slid by one step
    assert kept.built == 101
    for _ in range(2 * comm.KEEP_CALLS):  # step 1 left every window: it is let go
        comm.figures_by_pid(steps[1:101], [501], kept)
    assert kept.built == 101
    comm.figures_by_pid(steps[:100], [501], kept)
    assert kept.built == 102


def test_snapshots_taken_tick_by_tick_hold_what_a_fresh_session_gives() -> None:
    """The TUI's ticks (with the phase table) and the findings thread's (another window)
    beside each other, against one snapshot of a session that kept nothing before."""
    live, live_clock = started()
    step = 1
    for _ in range(60):
        step = feed(live, live_clock, 0.5, step)
        live.snapshot(10.0, with_phases=True)
        live.snapshot(5.0)
    fresh, fresh_clock = started()
    feed(fresh, fresh_clock, 30.0, 1)
    assert fresh_clock.now == live_clock.now
    for window_s, phases in ((10.0, True), (5.0, False), (20.0, False)):
        assert live.snapshot(window_s, with_phases=phases) == fresh.snapshot(
            window_s, with_phases=phases
        )
    kept = live.snapshot(10.0)
    assert kept.ranks[0].held and kept.ranks[0].comm is not None  # the figures kept are read
    assert len(kept.gpus) == 8 and kept.observation is not None


def test_a_snapshot_is_kept_while_nothing_comes_and_taken_again_when_something_does() -> None:
    session, clock = started()
    feed(session, clock, 20.0, 1)
    session.apply(events.JobEnded(0, (), at=clock.now))
    first = session.snapshot(10.0)
    clock.advance(5.0)
    again = session.snapshot(10.0)
    assert again.t == clock.now and first.t == clock.now - 5.0  # the clock is read again
    assert again.observation is first.observation and again.gpus is first.gpus  # kept
    assert again == replace(first, t=clock.now)
    session.apply(events.CoresCounted(16))
    assert session.snapshot(10.0).observation is not first.observation  # another input
    session.apply(events.NoticeAdded("the job's log was copied"))
    noticed = session.snapshot(10.0)
    assert noticed.notices == ("the job's log was copied",)
    assert noticed.observation is not first.observation  # an event came: taken again


def test_a_running_jobs_window_moves_with_the_clock_so_nothing_whole_is_kept() -> None:
    session, clock = started()
    feed(session, clock, 20.0, 1)
    first = session.snapshot(10.0)
    assert session.snapshot(10.0).observation is first.observation  # the clock stood still
    clock.advance(3.0)  # no event, but steps left the window
    moved = session.snapshot(10.0)
    assert moved.observation is not first.observation
    assert moved.steps.steps < first.steps.steps
