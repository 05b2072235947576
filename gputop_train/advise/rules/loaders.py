"""What the job's loaders and cores show: busy, idle or starved workers, the cores free to the
job and who holds the others, and the evidence lines for them. The input rules' reasoning about
CPUs, apart from the rules themselves so that each reads as its decision."""

from __future__ import annotations

import math

from ... import format as fmt
from ...session.stats import Observation
from .window import wait_pct

# A worker this busy has no time left to give (psutil CPU %, one core = 100): the playbook's
# rung 4 on the H100 had 8 workers at 97-100% each while the step waited 27% for data.
WORKER_SATURATED_PCT = 85.0
# A worker whose CPU plus its wait for a CPU (run-queue wait, /proc schedstat) reaches that
# line would be saturated on a free core: it is CPU-bound and starved by other processes, not
# waiting on storage (issue 39: on the 2-core box beside CPU hogs such a loader was told it
# waits on "storage, network, a sleep" and to raise num_workers to 3; that measured
# 0.89-0.95x). The same line serves both readings.
# Workers this idle are not what the step waits for (on the H100 box even 15 workers of a
# CPU-bound pipeline averaged 22% or more): the wait comes from elsewhere.
WORKER_IDLE_PCT = 10.0
# More workers need a core each to run on: most of one core free to the job (idle machine-wide
# and within its affinity and quota, less what the job uses: psutil) is the least that can
# carry another worker; the margin under 1.0 covers psutil's sampling jitter and the
# monitor's own 1-3% of a core. On the H100 an ImageNet-style loader with 4 workers at 95%
# and about 11 of 16 cores idle ran 3.1x faster with 16 workers (issue: diagnosis).
IDLE_CORES_FOR_WORKERS = 0.8
# Workers whose loading waits on something other than their CPU (storage, network, a sleep)
# need no core each: they overlap their waits. A Dataset sleeping 5 ms per item with no
# workers (training process at 15-26% CPU, data-wait 67%) on the 2-core dev box, busy with
# other processes, ran 5.3x faster with 4 workers (issue 29). Each worker is still a process
# with its own copy of the Dataset: at most this many per core the job may use.
WAITING_WORKERS_PER_CORE = 4
# The training process at this CPU (one core = 100) while input-bound and the workers have
# time to spare: it, not the workers, is what the input waits for (pinning, unpacking).
MAIN_PROCESS_BUSY_PCT = 90.0
# A training process that loads its own batches (no workers) is starved of CPU when it is
# ready to run at the busy line (CPU + run-queue wait, as a worker) and waits for a CPU at
# least this share of that time. Issue 46: the CPU demo beside 2 hogs on the 2-core dev box
# waited 1.3 s on the run queue for each 0.7 s it ran (65%); alone it waits a few %.
MAIN_STARVED_SHARE = 0.25


def workers_idle(o: Observation) -> bool:
    return (
        bool(o.workers)
        and o.worker_cpu_pct is not None
        and o.worker_cpu_pct < WORKER_IDLE_PCT
        and not workers_starved(o)
    )


def workers_busy(o: Observation) -> bool:
    return (
        bool(o.workers)
        and o.worker_cpu_pct is not None
        and (o.worker_cpu_pct >= WORKER_SATURATED_PCT)
    )


def workers_starved(o: Observation) -> bool:
    """The workers are ready to compute but wait for a CPU: short of the busy line on the CPU
    they get, at it with the CPU they wait for (run-queue wait)."""
    cpu, wait = o.worker_cpu_pct, o.worker_run_wait_pct
    if not o.workers or cpu is None or wait is None or workers_busy(o):
        return False
    return cpu + wait >= WORKER_SATURATED_PCT


def main_starved(o: Observation) -> bool:
    """No workers, and the training process, which loads every batch, is ready to compute
    but waits for a CPU (run-queue wait): other processes, not storage, hold its input."""
    cpu, wait = o.main_cpu_pct, o.main_run_wait_pct
    if o.workers or cpu is None or wait is None:
        return False
    return cpu + wait >= WORKER_SATURATED_PCT and wait >= MAIN_STARVED_SHARE * (cpu + wait)


def loaders_starved(o: Observation) -> bool:
    """The processes that load the batches (the workers, else the training process) are
    starved of CPU."""
    return workers_starved(o) or main_starved(o)


def within_knob(o: Observation, workers: int) -> int:
    """A proposed worker count within the range of the job's workers knob (the built-in one
    stops at the machine's cores): a proposal the knob refuses is no proposal."""
    return workers if o.workers_max is None else min(workers, o.workers_max)


def one_worker_per_core(o: Observation) -> bool:
    """Every rank's workers together number one per core the job may use."""
    room = o.room_cores
    return bool(o.workers and room and o.workers * o.local_ranks >= room and not workers_idle(o))


def cores_left(o: Observation) -> bool | None:
    """Whether another worker would get a core: one is free to the job (idle machine-wide,
    within its affinity and quota) and the workers do not already number one per core; None
    where unknown. With 16 workers on the 16-core H200 box at 82% each the machine read 2
    cores idle, yet 32 workers ran 12% slower (scheduling slack, not room for more workers:
    docs/diagnosis.md)."""
    if one_worker_per_core(o):
        return False
    free = o.free_per_rank  # each rank's loader takes a worker: a core per rank
    return None if free is None else free >= IDLE_CORES_FOR_WORKERS


def others_hold_cores(o: Observation) -> bool:
    """Other processes use more of the machine than the job does: where no core is free,
    they, not the job's input work, hold them (a neighbour's job, a notebook, a CPU hog)."""
    others, job = o.others_cores, o.job_cores
    return others is not None and job is not None and others > job


def _loaders_cpu_bound(o: Observation) -> bool:
    """The processes that load the batches spend their time on the CPU: busy workers; with
    none, a training process at the busy line (it loads and steps on its own core)."""
    if o.workers:
        return workers_busy(o) or workers_starved(o)
    busy = o.main_cpu_pct is not None and o.main_cpu_pct >= MAIN_PROCESS_BUSY_PCT
    return busy or main_starved(o)


def loading_waits_elsewhere(o: Observation) -> bool:
    """No core is free, other processes hold them, and the job's loaders are not busy: the
    input waits on storage, a network, a sleep or the scheduler, not on its own CPU work.
    Workers overlap such waits without a core each (the sleep-bound Dataset of issue 29)."""
    return (
        cores_left(o) is False
        and not one_worker_per_core(o)
        and others_hold_cores(o)
        and not _loaders_cpu_bound(o)
    )


def waiting_workers(o: Observation) -> int:
    """Workers enough to overlap a wait that is not CPU work: the loaders deliver a batch per
    step now; to keep up with the step's compute alone they must deliver 1 / (1 - wait)
    times as many, each waiting as long as before."""
    current = max(1, o.workers or 0)
    share = min(0.95, wait_pct(o) / 100.0)
    wanted = math.ceil(current / (1.0 - share))
    room = o.room_per_rank or 2.0 / o.local_ranks
    return within_knob(o, max(current + 1, min(wanted, int(WAITING_WORKERS_PER_CORE * room))))


def main_process_limits(o: Observation) -> bool:
    """The training process, not the workers, is what the input waits for: it is busy, the
    workers are not, and a core is idle (on a saturated machine the workers' low share is
    contention, not spare time). A CPU job's training process computes the model itself:
    there its CPU says nothing about the input."""
    return (
        o.uses_gpu
        and bool(o.workers)
        and not workers_busy(o)
        and not workers_starved(o)
        and cores_left(o) is not False
        and o.main_cpu_pct is not None
        and o.main_cpu_pct >= MAIN_PROCESS_BUSY_PCT
    )


def _room_text(o: Observation) -> str:
    room = o.room_cores
    if room is None:
        return fmt.NA
    limited = o.cpu_count is not None and room < o.cpu_count
    return f"{room:g}" + (f" (of {o.cpu_count}: affinity, cgroup quota)" if limited else "")


def _use_text(o: Observation) -> str:
    """Who uses the busy cores: the job's processes, and the others."""
    job, others = o.job_cores, o.others_cores
    if others is None or job is None:
        return f"machine-wide CPU {fmt.pct(o.system_cpu_pct)}"
    return f"the job uses {job:.1f} cores, other processes {others:.1f}"


def cores_evidence(o: Observation) -> str:
    free = o.free_cores
    if one_worker_per_core(o):
        workers = o.workers * o.local_ranks if o.workers else 0
        return (
            f"{workers} workers on {_room_text(o)} cores: one per core already "
            f"({_use_text(o)}; psutil)"
        )
    if free is None:
        return f"{_room_text(o)} cores, machine-wide use N/A (psutil)"
    return f"{free:.1f} of {_room_text(o)} cores free to the job ({_use_text(o)}; psutil)"


def worker_evidence(o: Observation) -> str:
    if not o.workers:
        text = (
            "no DataLoader workers: the training process loads every batch, at "
            f"{fmt.pct(o.main_cpu_pct)} CPU (psutil)"
        )
        if main_starved(o):
            text += (
                f", waiting {fmt.pct(o.main_run_wait_pct)} of a core for a CPU (run queue, "
                "/proc schedstat): CPU-bound, starved by other processes"
            )
        return text
    who = f"{o.workers} workers"
    if o.local_ranks > 1:
        who += f" per rank's loader × {o.local_ranks} ranks on this node"
    text = f"{who} at {fmt.pct(o.worker_cpu_pct)} CPU each (psutil)"
    if workers_starved(o):
        text += (
            f", each waiting {fmt.pct(o.worker_run_wait_pct)} of a core for a CPU (run queue, "
            "/proc schedstat): CPU-bound, starved by other processes"
        )
    return text
