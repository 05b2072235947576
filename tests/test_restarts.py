"""A torchrun restart (--max-restarts) replaces every rank's process: the new rank 0 leads
(totals, knobs, the advisor) and the dead processes' figures leave the ranks' table and the
Prometheus series (issue 30, point 6); a rank that died without a replacement stays, gone."""

from __future__ import annotations

import pytest

from gputop_train import events
from gputop_train.session.model import Session
from tests.support.clock import ManualClock


def _rank(session: Session, pid: int, rank: int, first_t: float, steps: int) -> None:
    hello = {"rank": rank, "local_rank": rank, "host": "node", "argv": ["train.py"]}
    session.apply(events.ProcessHello.of(pid, hello))
    rows = [
        [i, first_t + i * 0.05, 50.0, 1.0, 8, 1, None, None, None, None]
        for i in range(1, steps + 1)
    ]
    session.apply(events.StepRows(pid, tuple(rows)))


def test_after_a_restart_the_new_rank_zero_leads_and_the_dead_ranks_leave() -> None:
    clock = ManualClock(1100.0)
    session = Session(command=("torchrun", "--max-restarts", "1", "train.py"), clock=clock)
    for pid, rank in ((11, 0), (12, 1)):
        _rank(session, pid, rank, 1000.0, 200)  # the first attempt: 200 steps, then a crash
    for pid in (11, 12):
        session.apply(events.ProcessGone(pid))
    for pid, rank in ((21, 0), (22, 1)):
        _rank(session, pid, rank, 1090.0, 60)  # the restart: 60 steps so far
    snap = session.snapshot(window_s=5.0)
    assert session.primary_pid() == 21
    assert snap.total_steps == 60  # the new rank 0's own count, not the dead one's 200
    assert {r.who.pid for r in snap.ranks} == {21, 22}
    assert {p.pid for p in snap.hooked} == {21, 22}


def test_a_rank_that_died_without_a_replacement_stays_as_gone() -> None:
    session = Session(command=("torchrun", "train.py"), clock=ManualClock(1010.0))
    for pid, rank in ((11, 0), (12, 1)):
        _rank(session, pid, rank, 1000.0, 100)
    session.apply(events.ProcessGone(12))
    snap = session.snapshot(window_s=5.0)
    assert [(p.pid, p.connected) for p in snap.hooked] == [(11, True), (12, False)]
    assert session.primary_pid() == 11


def test_a_restart_adds_nothing_of_the_dead_generation_to_samples() -> None:
    clock = ManualClock(990.0)  # launched before the first step: no step is an attach's backlog
    session = Session(command=("torchrun", "--max-restarts", "1", "train.py"), clock=clock)
    for pid, rank in ((11, 0), (12, 1)):
        _rank(session, pid, rank, 1000.0, 200)  # 200 steps of 8 samples, ending at t=1010
    for pid in (11, 12):
        session.apply(events.ProcessGone(pid))
    for pid, rank in ((21, 0), (22, 1)):
        _rank(session, pid, rank, 1090.0, 60)  # the restart: 60 steps each, up to t=1093
    clock.advance(105.0)
    # The window spans both generations: only the living ranks' steps count.
    snap = session.snapshot(window_s=100.0)
    assert snap.total_samples == 2 * 60 * 8
    assert {r.who.pid for r in snap.ranks} == {21, 22}
    # Each rank steps 8 samples every 50 ms: 160 samples/s a rank, 320 the job.
    assert snap.steps.samples_per_s == pytest.approx(320.0)
