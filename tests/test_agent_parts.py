"""The hook agent's parts, each alone: the loader feeds (hook/feeds.py), the primary-thread
election and its gate (hook/primary.py), the probe schedule (hook/probe_schedule.py), the
step rows (hook/step_ring.py), the outbox (hook/outbox.py) and the workload probes
(hook/workload_probes.py). The agent keeps the step boundary's orchestration; these are what
it asks."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import torch

from gputop_train import wire
from gputop_train.hook.agent import Agent
from gputop_train.hook.feeds import Feeds
from gputop_train.hook.outbox import PENDING_NOTICES, Outbox
from gputop_train.hook.primary import (
    NOT_PRIMARY,
    PRIMARY,
    PRIMARY_HANDOVER_STEPS,
    TOOK_OVER,
    PrimaryElection,
    primary_thread_only,
)
from gputop_train.hook.probe_schedule import ProbeSchedule
from gputop_train.hook.probes import (
    COUNT_AFTER_CHANGE_STEPS,
    FLOP_COUNT_STEP,
    MODEL_FACTS_STEP,
    PROBE_AFTER_CHANGE_STEPS,
    PROFILE_AFTER_CHANGE_STEPS,
    PROFILE_STEP,
    SYNC_SCAN_EVERY_STEPS,
    SyncScanner,
)
from gputop_train.hook.step_ring import MAX_STEPS_AWAITING_GPU, StepRing
from gputop_train.hook.workload_probes import WorkloadProbes


class _Iterator:
    """A stand-in DataLoader iterator (weakly referenceable, as the real one is)."""


def _loader(workers: int = 2) -> Any:
    return SimpleNamespace(
        num_workers=workers, pin_memory=True, persistent_workers=False, batch_size=4
    )


def test_a_feed_gives_its_wait_samples_batches_and_the_epochs_loader_facts_once() -> None:
    feeds, published = Feeds(), list[wire.Frame]()
    loader, iterator = _loader(), _Iterator()
    assert not feeds.seen
    feeds.started(0.5, loader, iterator)
    for _ in range(2):
        feeds.batch(0.25, torch.zeros(4, 3), iterator)
    assert feeds.seen
    assert feeds.take(published.append) == (1.0, 8, 2)
    (facts,) = published
    expected = wire.Loader(
        num_workers=2, pin_memory=True, persistent_workers=False, batch_size=4,
        dtype="torch.float32", shape=[4, 3], bytes=48, pinned=False,
    )  # fmt: skip
    assert facts == expected
    feeds.batch(0.1, torch.zeros(4, 3), iterator)
    assert feeds.take(published.append) == (0.1, 4, 1) and len(published) == 1  # said once
    assert feeds.current() == (loader, iterator)


def test_an_evaluation_pass_beside_the_training_feed_is_left_out_of_the_step() -> None:
    feeds, train, evaluation = Feeds(), _Iterator(), _Iterator()
    feeds.started(0.0, _loader(), train)
    feeds.batch(0.2, torch.zeros(4), train)
    feeds.started(0.0, _loader(), evaluation)
    feeds.batch(0.3, torch.zeros(4), evaluation)
    feeds.exhausted(0.1, evaluation)
    assert feeds.take(lambda frame: None) == (0.2, 4, 1)
    assert feeds.current()[1] is None  # the last batch's iterator has run to its end
    feeds.batch(0.2, torch.zeros(4), train)
    assert feeds.current()[1] is train
    feeds.exhausted(0.0, train)
    assert feeds.current()[1] is None


def test_another_threads_feeds_are_dropped_once_it_trains_too() -> None:
    feeds, ours = Feeds(), _Iterator()
    feeds.batch(0.2, torch.zeros(4), ours)
    other = threading.Thread(target=feeds.batch, args=(0.5, torch.zeros(8), _Iterator()))
    other.start()
    other.join()
    feeds.keep_thread(threading.get_ident())
    assert feeds.take(lambda frame: None) == (0.2, 4, 1)


def test_the_first_optimizer_counts_and_one_that_steps_alone_long_enough_takes_over() -> None:
    election = PrimaryElection()
    first, second = (
        torch.optim.SGD([torch.zeros(1)], lr=0.1),
        torch.optim.SGD([torch.zeros(1)], lr=0.1),
    )
    assert election.optimizer is None and election.elect(first) == PRIMARY
    assert election.thread == threading.get_ident() and election.on_primary_thread()
    assert election.elect(second) == NOT_PRIMARY  # a GAN's second optimizer
    assert election.elect(first) == PRIMARY  # the counted one in between: the count restarts
    verdicts = [election.elect(second) for _ in range(PRIMARY_HANDOVER_STEPS)]
    assert verdicts == [NOT_PRIMARY] * (PRIMARY_HANDOVER_STEPS - 1) + [TOOK_OVER]
    assert election.optimizer is not None and election.optimizer() is second


def test_a_second_training_thread_is_noted_and_never_elected() -> None:
    election, counted = PrimaryElection(), torch.optim.SGD([torch.zeros(1)], lr=0.1)
    election.elect(counted)
    seen: list[Any] = []

    def other() -> None:
        optimizer = torch.optim.SGD([torch.zeros(1)], lr=0.1)
        seen.append([election.elect(optimizer) for _ in range(PRIMARY_HANDOVER_STEPS + 1)])
        seen.append(election.on_primary_thread())
        seen.append(election.note_other_trainer())

    thread = threading.Thread(target=other, name="second-trainer")
    thread.start()
    thread.join()
    assert seen[0] == [NOT_PRIMARY] * (PRIMARY_HANDOVER_STEPS + 1)
    assert seen[1] is False and election.other_trainer
    assert "'second-trainer'" in seen[2] and threading.current_thread().name in seen[2]


def test_the_probes_fall_due_at_their_steps_and_move_on_after_a_change() -> None:
    syncs = SyncScanner(SimpleNamespace(cuda=None, __file__=None))
    schedule = ProbeSchedule(syncs)
    due = [s for s in range(1, SYNC_SCAN_EVERY_STEPS + 1) if schedule.model_due(s)]
    assert due == [MODEL_FACTS_STEP, SYNC_SCAN_EVERY_STEPS]
    assert (schedule.count_step, schedule.profile_step) == (FLOP_COUNT_STEP, PROFILE_STEP)
    schedule.after_knob_change(100)
    assert schedule.model_due(100 + PROBE_AFTER_CHANGE_STEPS)
    assert syncs.due_at == 100 + PROBE_AFTER_CHANGE_STEPS
    assert schedule.count_step == 100 + COUNT_AFTER_CHANGE_STEPS
    assert schedule.profile_step == 100 + PROFILE_AFTER_CHANGE_STEPS
    schedule.after_new_optimizer(200)  # a sweep's next trial: facts and FLOPs, not kernels
    assert schedule.model_due(200 + PROBE_AFTER_CHANGE_STEPS)
    assert schedule.count_step == 200 + COUNT_AFTER_CHANGE_STEPS
    assert schedule.profile_step == 100 + PROFILE_AFTER_CHANGE_STEPS
    assert syncs.due_at == 100 + PROBE_AFTER_CHANGE_STEPS


class _Trainer:
    """The gate's owner, as the agent is: an election and the events it let through."""

    def __init__(self) -> None:
        self.primary = PrimaryElection()
        self.seen: list[str] = []

    @primary_thread_only
    def on_batch(self, name: str) -> None:
        self.seen.append(name)


def _on_thread(call: Any, *args: Any) -> None:
    thread = threading.Thread(target=call, args=args)
    thread.start()
    thread.join()


def test_the_gate_drops_another_trainers_events_only_once_one_is_noted() -> None:
    trainer = _Trainer()
    trainer.primary.elect(torch.optim.SGD([torch.zeros(1)], lr=0.1))
    _on_thread(trainer.on_batch, "before the second trainer stepped")
    trainer.primary.other_trainer = True  # note_other_trainer, as the agent calls it
    _on_thread(trainer.on_batch, "the second trainer's")
    trainer.on_batch("the first trainer's")
    assert trainer.seen == ["before the second trainer stepped", "the first trainer's"]


def test_every_training_thread_event_of_the_agent_goes_through_the_one_gate() -> None:
    gated = {name for name, value in vars(Agent).items() if hasattr(value, "__wrapped__")}
    assert gated == {
        "on_iterator_created", "on_batch", "on_iterator_exhausted", "on_autocast",
        "on_backward", "on_grad_norm", "count_samples", "count_tokens",
    }  # fmt: skip
    # The step's end elects the optimizer itself; the backward's end is the model's thread's.
    assert not gated & {"on_optimizer_step", "on_optimizer_pre_step", "on_backward_end"}


class _Event:
    """A CUDA event whose work runs when the test says (``Event.query()``)."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.ran = False

    def record(self) -> None:
        self.ran = False

    def query(self) -> bool:
        return self.ran

    def elapsed_time(self, end: _Event) -> float:
        return 2.5


class _Model:
    """The model probe's columns: resolved or not, as the ring asks."""

    def row(self, counts: Any, resolved: bool) -> list[Any]:
        return [counts.tokens, "resolved" if resolved else "N/A", *[None] * 6]


def _counts(tokens: int) -> Any:
    return SimpleNamespace(tokens=tokens, masks=None, gpu_next=True)


def _step_row(step: int) -> list[Any]:
    return [step, 0.0, 1.0, None, 4, 1, None, None, None, None, None]


def test_a_cpu_steps_row_joins_the_ring_at_once_with_its_model_columns() -> None:
    ring = StepRing(SimpleNamespace(cuda=None))
    ring.finish(_step_row(1), _counts(64), cuda=False, model=_Model())  # type: ignore[arg-type]
    (row,) = ring.rows_after(0)
    assert len(row) == len(wire.STEP_FIELDS) and row[wire.COLUMN["tokens"]] == 64
    assert row[wire.COLUMN["host_gap_ms"]] == "resolved" and row[wire.COLUMN["gpu_ms"]] is None


def test_a_cuda_steps_row_waits_for_its_gpu_time_and_the_oldest_go_past_the_bound() -> None:
    events: list[_Event] = []

    def event(enable_timing: bool = True) -> _Event:
        events.append(_Event())
        return events[-1]

    ring, model = StepRing(SimpleNamespace(cuda=SimpleNamespace(Event=event))), _Model()
    ring.finish(_step_row(0), _counts(8), cuda=True, model=model)  # type: ignore[arg-type]
    ring.mark_start()  # step 1's first batch
    ring.finish(_step_row(1), _counts(8), cuda=True, model=model)  # type: ignore[arg-type]
    assert ring.rows_after(-1) == []  # its GPU work has not run
    for made in events:
        made.ran = True
    ring.collect(model)  # type: ignore[arg-type]
    assert [r[0] for r in ring.rows_after(-1)] == [0, 1]
    (row,) = ring.rows_after(0)
    assert row[wire.COLUMN["gpu_ms"]] == 2.5 and row[wire.COLUMN["host_gap_ms"]] == "resolved"
    for step in range(2, MAX_STEPS_AWAITING_GPU + 3):
        ring.finish(_step_row(step), _counts(8), cuda=True, model=model)  # type: ignore[arg-type]
    dropped = ring.rows_after(1)
    assert [r[0] for r in dropped] == [2]  # the GPU far behind: the oldest goes, unresolved
    assert dropped[0][wire.COLUMN["host_gap_ms"]] == "N/A"
    ring.flush(model)  # type: ignore[arg-type]
    assert [r[0] for r in ring.rows_after(1)] == list(range(2, MAX_STEPS_AWAITING_GPU + 3))


def _frames(sent: list[bytes]) -> list[wire.Frame | None]:
    return [wire.decode_frame(raw) for raw in wire.FrameDecoder().feed(b"".join(sent))]


def test_the_outbox_sends_a_fact_once_and_keeps_the_latest_for_a_later_hello() -> None:
    outbox = Outbox()
    outbox.publish(wire.Flops(step=3, flops=10))
    outbox.publish(wire.Flops(step=13, flops=12))
    outbox.notice("said before any monitor")
    sent = outbox.take(pid=7, connected=False)
    assert _frames(sent) == [
        wire.Flops(step=3, flops=10), wire.Flops(step=13, flops=12),
    ]  # fmt: skip
    assert outbox.take(pid=7, connected=False) == []  # each fact once
    assert outbox.latest() == [wire.Flops(step=13, flops=12).fields()]  # a later hello's
    for number in range(PENDING_NOTICES + 1):
        outbox.notice(f"notice {number}")
    notices = _frames(outbox.take(pid=7, connected=True))
    assert len(notices) == PENDING_NOTICES and notices[-1] == wire.Notice(
        f"notice {PENDING_NOTICES}", pid=7
    )  # the newest kept, waiting for the first monitor


def test_a_failing_workload_probe_stops_them_alone_and_says_so_once() -> None:
    published: list[wire.Frame] = []
    notices: list[str] = []
    probes = WorkloadProbes(torch, published.append, notices.append)

    def no_profiler() -> None:
        raise RuntimeError("no profiler here")

    probes._profile.start = no_profiler  # type: ignore[method-assign]
    probes.start_profile()
    probes.start_profile()
    assert len(notices) == 1 and "no profiler here" in notices[0]
    assert probes.start_count(2)  # the FLOP counter still counts; the census is off
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.zeros(2, 4)).sum().backward()
    probes.end(3, 2, optimizer, None, lambda: False)
    assert [type(frame) for frame in published] == [wire.Flops] and probes.census is None
