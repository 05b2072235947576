"""The monitor yields to the job: a lower CPU priority and the idle I/O class.

A job whose input pipeline already uses every core is exactly the one a user watches with
this tool; there the monitor competes with the DataLoader workers for CPU. At nice +10 the
kernel gives the job's threads the CPU first (CFS weights: nice 0 vs 10 is ~9:1), and the
idle I/O class keeps the recording's writes behind the job's reads. ``--no-nice`` keeps the
monitor at the job's priority.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psutil

# How far below the job the monitor runs: CFS gives nice 0 about 9x the CPU of nice 10.
MONITOR_NICENESS = 10
_LOWEST = 19  # the lowest CPU priority there is


def yield_to_job(job_pid: int) -> str | None:
    """Lower the CPU priority of every thread of ours to ``MONITOR_NICENESS`` below the job's
    (at least one below it, at most 19), and put our I/O in the idle class. Threads and
    processes started later (py-spy) inherit both. Returns what could not be done, or None."""
    try:
        job_nice = psutil.Process(job_pid).nice()
    except psutil.Error:
        job_nice = 0
    own = os.getpriority(os.PRIO_PROCESS, 0)
    target = min(_LOWEST, max(own + MONITOR_NICENESS, job_nice + 1))
    problems = []
    for tid in _our_threads():
        # Linux keeps niceness per thread: each of ours (the recorder's too) is set.
        try:
            os.setpriority(os.PRIO_PROCESS, tid, target)
        except OSError as error:
            problems.append(f"CPU priority: {error.strerror}")
        with contextlib.suppress(psutil.Error, AttributeError, OSError, ValueError):
            psutil.Process(tid).ionice(psutil.IOPRIO_CLASS_IDLE)  # Linux only
    return problems[0] if problems else None


def _our_threads() -> list[int]:
    tasks = Path("/proc/self/task")
    if tasks.is_dir():
        return [int(tid) for tid in os.listdir(tasks)]
    return [0]  # elsewhere niceness is per process
