"""The session's parts, each alone: the step log and the hooked processes (the GPU part has
tests/test_gpu_tracking.py), and the activity said in words by the views."""

from __future__ import annotations

from gputop_train import events
from gputop_train.session import step_log
from gputop_train.session.hooked import HookedProcesses
from gputop_train.session.snapshot import Activity
from gputop_train.session.step_log import StepLog
from gputop_train.views import activity_note

STARTED = 1000.0


def row(step: int, t: float, samples: int | None = 32) -> list[object]:
    """A wire row of the first ten columns: step, t, step_ms, data_ms, samples, batches, ..."""
    return [step, t, 10.0, 1.0, samples, 1, None, None, None, None]


def test_a_reattachs_resent_backlog_is_skipped_and_counted_apart() -> None:
    log = StepLog(STARTED)
    steps, malformed = step_log.parse(7, [row(1, STARTED - 2), row(2, STARTED + 1), ["x"], 5])
    assert malformed == 2
    log.take(7, steps)
    resent, _ = step_log.parse(7, [row(2, STARTED + 1), row(3, STARTED + 2)])
    log.take(7, resent)  # a re-attach sends the ring again: step 2 is not taken twice
    assert [s.step for s in log.steps] == [1, 2, 3]
    assert log.steps_before == {7: 1}  # made before this monitor started
    assert log.total_samples == 64  # the session's own steps only
    assert log.samples_by_pid == {7: 96}
    assert log.samples_of_current({7}) == 64 - 96  # a replaced generation's are taken off
    assert log.latest()[7].step == 3


def test_the_step_a_change_is_asked_for_is_ahead_at_the_recent_pace() -> None:
    steps, _ = step_log.parse(7, [row(i, STARTED + i * 0.25) for i in range(1, 11)])
    last = steps[-1].t
    assert step_log.step_ahead(40, steps, 2.0, 5, now=last) == 48  # 4 steps/s
    assert step_log.step_ahead(40, steps[:1], 2.0, 5, now=last) == 45
    # Read 3 s late, the ranks are ~12 steps further than the monitor knows.
    assert step_log.step_ahead(40, steps, 2.0, 5, now=last + 3.0) == 60
    # A row older than a stopped rank's is not made up for without bound.
    far = step_log.step_ahead(40, steps, 2.0, 5, now=last + 1e6)
    assert far == 40 + 4 * (2 + step_log.MAX_LATE_S)


def test_a_restarted_rank_replaces_the_dead_one_and_the_lowest_rank_leads() -> None:
    hooked = HookedProcesses()
    assert hooked.primary({9, 4}) == 4  # rows but no hello: the lowest PID that stepped
    hooked.hello(events.ProcessHello(11, rank=1, world_size=2))
    hooked.hello(events.ProcessHello(10, rank=0, world_size=2))
    hooked.gone(10)
    hooked.hello(events.ProcessHello(20, rank=0, world_size=2))  # torchrun's restart
    assert hooked.replaced() == {10}
    assert hooked.primary(()) == 20
    assert hooked.world_size() == 2


def test_the_activity_is_said_in_words_by_the_views() -> None:
    assert activity_note(None) is None  # stepped: nothing to say
    assert activity_note(Activity(3.0, running=False, exit_code=1)) == (
        "the job failed (exit 1) before any training step"
    )
    due = activity_note(Activity(3.0, stacks_due_s=7.2))
    assert due is not None and "the first window comes in 7 s" in due
    assert activity_note(Activity(3.0, stacks_shown=True)) is None  # its window is shown
    refused = activity_note(Activity(3.0, refused=(12, "over 8 monitors")))
    assert refused is not None and "PID 12 is hooked but" in refused
    hooked = activity_note(Activity(42.0, hooked=(12, 13)))
    assert hooked is not None and hooked.startswith("PID 12, 13 is hooked") and "42 s" in hooked
