"""The input rules on a busy box and on a node of several ranks (issues 37, 39, 40): a
CPU-bound loader starved by other processes is told the cores are held and that more workers
will not help, not that it waits on storage; the worker count the advisor sizes is each
rank's own loader's, and the room each rank's share of the node's."""

from __future__ import annotations

import os

import pytest

from gputop_train import events
from gputop_train.advise import rules
from gputop_train.advise.rules import WAITING_WORKERS_PER_CORE, findings
from gputop_train.collect.fake import FakeProcess, FakePsutil
from gputop_train.collect.procs import ProcessSampler
from gputop_train.collect.run_wait import run_queue_wait_ns
from gputop_train.record.reader import read, replay_all
from gputop_train.samples import ProcSample
from gputop_train.session import observe as observing
from gputop_train.session.model import Session
from tests.support.clock import ManualClock
from tests.support.observations import RUNG0, headline, ids, observe
from tests.support.torchrun import monitored_torchrun

# The case on the 2-core box beside CPU hogs (told "raise num_workers to 3", which measured
# 0.89-0.95x; `git show fd63014:benchmarks/diagnosis/starved_loader.py`: 2 -> 3 workers 0.81x):
# 2 workers get 35% of a core each and wait 55% of one for a CPU; the job holds 0.75 cores,
# others the rest.
STARVED = dict(
    RUNG0,
    step_data_wait_pct=60.0,
    workers=2,
    worker_cpu_pct=35.0,
    worker_run_wait_pct=55.0,
    main_cpu_pct=5.0,
    job_cpu_pct=75.0,
    system_cpu_pct=100.0,
    cpu_count=2,
    batch_shape=(32, 128),  # not images: the generic CPU-bound finding
    batch_dtype="torch.float32",
)


def test_a_starved_cpu_bound_loader_is_told_the_cores_are_held_not_to_add_workers() -> None:
    o = observe(**STARVED)
    finding = headline(o)
    assert finding.id == "input.cpu_bound"
    assert "other processes hold" in finding.title
    assert "more workers will not help" in finding.action
    assert finding.rules_out == ("workers",) and finding.changes == ()
    evidence = " ".join(finding.evidence)
    assert "waiting 55% of a core for a CPU" in evidence and "starved" in evidence
    assert not {"input.more_workers", "input.idle_workers"} & set(ids(o))
    assert "storage" not in " ".join([finding.action, *finding.evidence])


def test_cores_of_its_own_are_promised_at_least_the_smaller_of_the_wait_and_the_cpu_gain() -> None:
    # Beside 2 hogs on the 2-core dev box the rule's "up to 2.5x" (the data wait alone) ran 19.8x
    # once the hogs went (docs/advisor.md; `git show fd63014:benchmarks/diagnosis/starved_loader.py`
    # --give-cores):
    # what it can promise is a floor. 60% data-wait: the step loses at most 2.5x; the workers,
    # runnable 35 + 55 = 90% of the time and running 35%, would make batches 2.6x
    # faster: at least 2.5x, the smaller.
    finding = headline(observe(**STARVED))
    assert finding.expected_gain == "at least 2.5x" and finding.gain == pytest.approx(2.5)
    # Workers that wait less for a CPU bound it by their own speed-up: 35 + 20 over 35.
    less = headline(observe(**{**STARVED, "worker_run_wait_pct": 60.0, "worker_cpu_pct": 60.0}))
    assert less.expected_gain == "at least 2.0x", less
    # Not starved (the loaders busy on what they get): the step's wait, an upper bound.
    busy = observe(**{**STARVED, "worker_cpu_pct": 95.0, "worker_run_wait_pct": 2.0})
    assert all(not f.expected_gain or "at least" not in f.expected_gain for f in findings(busy))


def test_a_starved_loader_with_fewer_workers_than_cores_is_offered_one_per_core_at_most() -> None:
    # 1 worker on 2 cores: one per core spreads the job's share over both (1 -> 3 workers
    # measured 1.22x beside the hogs); beyond one per core, no.
    o = observe(**{**STARVED, "workers": 1, "job_cpu_pct": 40.0})
    finding = headline(o)
    assert "other processes hold" in finding.title
    assert finding.changes[0] == rules.Change("workers", 2)
    assert "one worker per core at most: num_workers 2" in finding.action
    assert "workers" not in finding.rules_out
    assert "storage" not in " ".join(finding.evidence)


def test_a_loader_that_sleeps_beside_the_same_hogs_still_gets_more_workers() -> None:
    # Same CPU share, little run-queue wait: the workers sleep (storage), they do not compute.
    o = observe(**{**STARVED, "workers": 1, "job_cpu_pct": 40.0, "worker_run_wait_pct": 5.0})
    finding = headline(o)
    assert finding.id == "input.more_workers"
    assert "storage" in " ".join(finding.evidence)


def test_the_sampler_reads_each_workers_run_queue_wait_as_a_share_of_a_core() -> None:
    clock = ManualClock(0.0)
    waited = {11: 0}
    psutil = FakePsutil(
        [
            FakeProcess(10, 1, "python", cpu=90.0),
            FakeProcess(11, 10, "pt_data_worker_0", cpu=40.0),
        ]
    )
    sampler = ProcessSampler(10, psutil_module=psutil, clock=clock, read_run_wait=waited.get)
    sampler.sample()
    clock.advance(2.0)
    waited[11] = 1_200_000_000  # 1.2 s waited in 2 s
    worker = next(p for p in sampler.sample() if p.role == "worker")
    assert worker.run_wait_pct == 60.0
    main = next(p for p in sampler.sample() if p.pid == 10)
    assert main.run_wait_pct is None  # no wait read for it here (tests/test_starved_main.py)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc only")
def test_the_kernels_run_queue_wait_is_read_for_a_live_process() -> None:
    waited = run_queue_wait_ns(os.getpid())
    assert waited is None or waited >= 0
    assert run_queue_wait_ns(2**22 + 1) is None  # no such process


# Two ranks with 4 workers each on a 16-core node, busy on their input, 6 cores idle.
TWO_RANKS = dict(
    RUNG0,
    workers=4,
    worker_cpu_pct=95.0,
    main_cpu_pct=60.0,
    job_cpu_pct=880.0,
    system_cpu_pct=62.5,
    local_ranks=2,
)


def test_each_ranks_loader_is_sized_from_its_own_workers_and_its_share_of_the_free_cores() -> None:
    o = observe(**TWO_RANKS)
    finding = headline(o)
    assert finding.id == "input.more_workers"
    # 6 free cores shared by 2 ranks: 3 more workers per loader, not 4 + 8 = 12.
    assert finding.changes == (rules.Change("workers", 7),)
    assert "4 workers per rank's loader × 2 ranks" in " ".join(finding.evidence)


def test_two_ranks_whose_workers_fill_the_node_are_not_told_to_add_more() -> None:
    # 2 ranks × 8 workers on 16 cores: one per core already, though each loader has 8.
    o = observe(**{**TWO_RANKS, "workers": 8, "job_cpu_pct": 1560.0, "system_cpu_pct": 99.0})
    assert "input.more_workers" not in ids(o)


def _two_rank_session(loader_fact: bool) -> Session:
    clock = ManualClock(100.0)
    session = Session(clock=clock)
    session.apply(events.CoresCounted(16))
    for pid, rank in ((21, 0), (22, 1)):
        session.apply(events.ProcessHello.of(pid, {"rank": rank, "world_size": 2}))
    if loader_fact:
        session.apply(events.FactSeen.of(21, {"type": "loader", "num_workers": 4}))

    def proc(pid: int, role: str, cpu: float) -> ProcSample:
        return ProcSample(pid, 1, "python", role, cpu, None, None, None, "running", 20.0)

    for _ in range(3):
        clock.advance(1.0)
        tree = (
            proc(20, "launcher", 1.0),
            *(proc(pid, "main", 60.0) for pid in (21, 22)),
            *(proc(pid, "worker", 95.0) for pid in range(30, 38)),  # 4 per rank
        )
        session.apply(events.ProcsSampled(tree, 62.5, usable_cores=16.0))
    return session


def test_the_session_gives_the_advisor_one_loaders_workers_not_the_sum_over_ranks() -> None:
    for with_fact in (True, False):  # the hook's count, else psutil's shared by the ranks
        session = _two_rank_session(with_fact)
        o = observing.observe(session._series(), [], [], 100.0, 104.0)
        assert (o.workers, o.local_ranks) == (4, 2), with_fact
        assert o.worker_run_wait_pct == 20.0
        assert o.job_cores is not None and o.job_cores > 8.0  # every rank's workers count


@pytest.mark.torch
def test_two_gloo_ranks_of_4_workers_each_are_advised_on_one_loaders_4(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 37 on a real job: torchrun, 2 gloo ranks, each with a DataLoader of 4 workers
    that wait 40 ms a batch. The advisor reads each loader's 4 (the hook's), the node's 2
    ranks, and sizes one loader; any worker change it proposes is per loader, not the sum."""
    run = monitored_torchrun(
        tmp_path_factory, 2, "ddp", "steps=120", "workers=4", "data_ms=40", record=True
    )
    recording = read(run.folder / "run.jsonl")
    session = replay_all(recording)
    span = recording.ended_at - recording.started_at + 1.0
    o = session.snapshot(window_s=span).observation
    assert o is not None
    assert (o.workers, o.local_ranks) == (4, 2)
    for finding in findings(o):
        for change in finding.changes:
            if change.role == "workers":
                assert 4 < change.value <= 4 + WAITING_WORKERS_PER_CORE * 2, finding.action
