"""The monitor yields to the job: a lower CPU priority and the idle I/O class.

A job whose input pipeline already uses every core is exactly the one a user watches with
this tool; there the monitor competes with the DataLoader workers for CPU. At nice +10 the
kernel gives the job's threads the CPU first (CFS weights: nice 0 vs 10 is ~9:1), and the
idle I/O class keeps the recording's writes behind the job's reads. ``--no-nice`` keeps the
monitor at the job's priority.

Under the kernel's autogroup scheduling (the default of many distributions, for processes
in the root CPU cgroup) the CPU is shared between *sessions* first, and nice only orders the
threads inside one: the job runs in a session of its own, so a monitor's nice +10 did nothing
for it (a nice-19 busy loop in another session cut a saturated job to 0.37-0.57x, issue 31).
There the monitor also lowers its own session's autogroup (``/proc/self/autogroup``), and
puts it back when it exits.
"""

from __future__ import annotations

import atexit
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
    autogroup = _lower_autogroup(target)
    return problems[0] if problems else autogroup


AUTOGROUP_ENABLED = Path("/proc/sys/kernel/sched_autogroup_enabled")
OWN_AUTOGROUP = Path("/proc/self/autogroup")
OWN_CGROUPS = Path("/proc/self/cgroup")


def autogroup_in_effect() -> bool:
    """Whether the kernel shares the CPU between sessions first: autogroup is on and we are
    in the root CPU cgroup (inside another cgroup, its weight rules and nice works)."""
    try:
        enabled = AUTOGROUP_ENABLED.read_text().strip() == "1"
        cgroups = OWN_CGROUPS.read_text().splitlines()
    except OSError:
        return False
    for line in cgroups:
        _, controllers, path = line.split(":", 2)
        cpu_line = controllers == "" or "cpu" in controllers.split(",")
        if cpu_line and path.strip() != "/":
            return False
    return enabled


def _lower_autogroup(target: int) -> str | None:
    """Set our session's autogroup to nice ``target`` until we exit; what failed, or None.
    The terminal's shell shares that session: it gets its priority back at our exit."""
    if not autogroup_in_effect():
        return None
    try:
        before = int(OWN_AUTOGROUP.read_text().split("nice")[1])
        if before >= target:
            return None
        OWN_AUTOGROUP.write_text(str(target))
    except (OSError, ValueError, IndexError) as error:
        return f"session priority: {getattr(error, 'strerror', None) or error}"
    atexit.register(_restore_autogroup, before)
    return None


def _restore_autogroup(nice: int) -> None:
    with contextlib.suppress(OSError):
        OWN_AUTOGROUP.write_text(str(nice))


def _our_threads() -> list[int]:
    tasks = Path("/proc/self/task")
    if tasks.is_dir():
        return [int(tid) for tid in os.listdir(tasks)]
    return [0]  # elsewhere niceness is per process
