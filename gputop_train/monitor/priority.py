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
There the monitor also lowers its own session's autogroup (``/proc/self/autogroup``), unless
the job shares that session (``python train.py &`` then ``gputop-train attach PID`` from one
terminal): lowering it would slow the job with us (7-10x, issue 39), and inside one autogroup
the threads' nice already puts the job first. A guard process (``autogroup_guard.py``) holds
the change and puts the session's priority back when the last monitor of that session exits,
however it exits (SIGKILL included).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import psutil

from .. import wire
from . import autogroup_guard

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
    give_back_abandoned()  # a lowering left by monitors killed with their guard
    autogroup = None if shares_autogroup(job_pid) else _lower_autogroup(target)
    return problems[0] if problems else autogroup


AUTOGROUP_ENABLED = Path("/proc/sys/kernel/sched_autogroup_enabled")
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


def autogroup_of(pid: int | str) -> str | None:
    """The autogroup a process is in ("autogroup-6"), or None where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/autogroup").read_text().split()[0].lstrip("/")
    except (OSError, IndexError):
        return None


def shares_autogroup(job_pid: int) -> bool:
    """Whether the job, or any process of its tree, is in our session's autogroup."""
    own = autogroup_of("self")
    if own is None:
        return False
    try:
        job = psutil.Process(job_pid)
        pids = [job_pid, *(child.pid for child in job.children(recursive=True))]
    except psutil.Error:
        pids = [job_pid]
    return any(autogroup_of(pid) == own for pid in pids)


GUARD = Path(__file__).with_name("autogroup_guard.py")
# How long an exiting monitor waits for its guard to give the session its priority back.
GUARD_EXIT_WAIT_S = 5.0
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # autogroup numbers start again at boot


def _guard_files(group: str) -> tuple[Path, Path]:
    """The holders and mutex files of our session's autogroup: in the user's own runtime
    directory, whatever GPUTOP_TRAIN_RUNTIME_DIR says. Every monitor of one session must share
    them: with one folder each (the test suite gives each test its own), each first guard
    noted the other's lowering as the session's nice, and the last put nice 10 back for good
    (issue 46: the suite left its terminal at nice 10)."""
    try:
        boot = BOOT_ID.read_text().strip()[:8]
    except OSError:
        boot = "boot"
    folder = wire.user_runtime_dir(create=True)
    return folder / f"{boot}-{group}.holders", folder / f"{boot}-{group}.mutex"


def give_back_abandoned() -> int | None:
    """Put back our session's nice where a lowering has no holder left: its guard was killed
    with its monitors (``kill -9`` of every process of ours), so nothing gave it back. The nice
    put back, or None. Called as a monitor starts and by one whose guard died before it."""
    if not autogroup_in_effect() or (group := autogroup_of("self")) is None:
        return None
    try:
        holders_path, mutex_path = _guard_files(group)
        if not holders_path.exists():
            return None
        holders = os.open(holders_path, os.O_RDWR)
        mutex = os.open(mutex_path, os.O_RDWR | os.O_CREAT, 0o600)
    except (OSError, wire.UnsafeRuntimeDir):
        return None
    try:
        return autogroup_guard.leave(holders, mutex)
    except (OSError, ValueError):
        return None
    finally:
        os.close(holders)
        os.close(mutex)


def _lower_autogroup(target: int) -> str | None:
    """Have a guard hold our session's autogroup at nice ``target`` until we exit (the last
    monitor of the session restores it); what failed, or None."""
    if not autogroup_in_effect():
        return None
    group = autogroup_of("self")
    if group is None:
        return "session priority: /proc/self/autogroup cannot be read"
    try:
        holders, mutex = _guard_files(group)
        guard = subprocess.Popen(
            [sys.executable, "-S", str(GUARD), str(holders), str(mutex), str(target)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, wire.UnsafeRuntimeDir) as error:
        return f"session priority: {getattr(error, 'strerror', None) or error}"
    assert guard.stdout is not None
    answer = guard.stdout.readline().decode(errors="replace").strip()
    if answer != "ok":
        guard.wait()
        return f"session priority: {answer or 'the guard did not start'}"
    atexit.register(_release, guard)
    return None


def _release(guard: subprocess.Popen[bytes]) -> None:
    """At a normal exit: end the guard and wait for it, so the shell's prompt comes back at
    its own priority. (Killed, we close its pipe all the same and it restores alone.) A guard
    that was killed before us restored nothing: we do its part."""
    died_before = guard.poll() is not None
    with contextlib.suppress(OSError):
        assert guard.stdin is not None
        guard.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        guard.wait(GUARD_EXIT_WAIT_S)
    if died_before or guard.returncode != 0:
        give_back_abandoned()


def _our_threads() -> list[int]:
    tasks = Path("/proc/self/task")
    if tasks.is_dir():
        return [int(tid) for tid in os.listdir(tasks)]
    return [0]  # elsewhere niceness is per process
