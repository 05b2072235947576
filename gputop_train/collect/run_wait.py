"""How long a process waited for a CPU it was ready to use: the kernel's run-queue wait.

psutil's CPU % cannot tell a DataLoader worker that sleeps (storage, a network, a sleep) from
one that is ready to compute but finds every core taken by other processes: both read, say,
40% of a core. The kernel counts the second kind of time apart: the second field of
``/proc/PID/task/TID/schedstat`` is the nanoseconds the thread spent runnable on a run queue
(Documentation/scheduler/sched-stats.rst). A worker's CPU plus its run-queue wait is the CPU
it would use on a free core. Linux only; None elsewhere, or where the kernel keeps no
schedstats.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def run_queue_wait_ns(pid: int, proc: Path = PROC) -> int | None:
    """The run-queue wait of every thread of ``pid`` so far, in nanoseconds; None: unknown."""
    tasks = proc / str(pid) / "task"
    try:
        tids = os.listdir(tasks)
    except OSError:
        return None
    total, found = 0, False
    for tid in tids:
        try:
            fields = (tasks / tid / "schedstat").read_text().split()
            total += int(fields[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
        found = True
    return total if found else None
