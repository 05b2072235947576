"""The hook agent's parts, each alone: the loader feeds (hook/feeds.py), the primary-thread
election (hook/primary.py) and the probe schedule (hook/probe_schedule.py). The agent keeps
the step boundary's orchestration; these are what it asks."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import torch

from gputop_train import wire
from gputop_train.hook.feeds import Feeds
from gputop_train.hook.primary import (
    NOT_PRIMARY,
    PRIMARY,
    PRIMARY_HANDOVER_STEPS,
    TOOK_OVER,
    PrimaryElection,
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
