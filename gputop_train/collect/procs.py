"""Process sampler: the job's process tree with CPU, memory and IO per process.

``psutil.Process`` objects are kept per PID so that CPU% and IO rates are deltas since the
previous sample rather than since process start; processes that vanish between two calls
are dropped quietly.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import events
from ..samples import ProcSample
from .base import COSTLY, Sink
from .cpu_room import usable_cores
from .run_wait import run_queue_wait_ns

# PyTorch names its DataLoader worker processes so (torch/utils/data/_utils/worker.py).
WORKER_NAME = "pt_data_worker"
# The processes whose run-queue wait is read: the workers, and the training process, which
# loads every batch itself with no workers (issue 46: a 0-worker loader starved of CPU by
# other processes was told it waits on "storage, network, a sleep"). One schedstat file per
# thread, once a second: the order of the children files' 416 us for 31 threads (below).
RUN_WAIT_ROLES = ("worker", "main")


# Seconds between reads of every thread's children file of a process; between them only its
# main thread's and those of the threads that had children are read. A training job's main
# process runs dozens of threads (an OpenMP pool per core, CUDA's, the pin-memory thread): all 31
# children files of a 31-thread process took 416 us of CPU, 13 us between full scans (dev box,
# benchmarks/overhead/sampler_cost.py --pid; docs/benchmarks.md §5). A child forked by another
# thread shows up within this long; DataLoader workers come from the thread that iterates the
# loader, remembered after the first scan.
FULL_SCAN_PERIOD_S = 5.0
# Seconds between reads of the cores the job may use (affinity, cgroup quota): a handful of
# small files, changed only by an administrator or a scheduler (taskset, a resized quota).
ROOM_PERIOD_S = 10.0


class ProcfsChildren:
    """Direct children of a process, from ``/proc/PID/task/TID/children``: a few small reads,
    where psutil's ``children()`` reads the stat file of every process on the box."""

    def __init__(self, proc: str = "/proc", clock: Callable[[], float] = time.monotonic) -> None:
        self._proc = proc
        self._clock = clock
        self._parents: dict[int, set[int]] = {}  # per PID: the threads that had children
        self._next_full_scan: dict[int, float] = {}

    def __call__(self, pid: int) -> list[int]:
        now = self._clock()
        full = now >= self._next_full_scan.get(pid, now)
        try:
            tids = (
                [int(tid) for tid in os.listdir(f"{self._proc}/{pid}/task")]
                if full
                else {pid, *self._parents[pid]}
            )
        except OSError:  # the process is gone: no children
            tids = []
        kids: list[int] = []
        parents = set()
        for tid in tids:
            with contextlib.suppress(OSError), open(f"{self._proc}/{pid}/task/{tid}/children") as f:
                found = f.read().split()
                if found:
                    parents.add(tid)
                    kids.extend(int(child) for child in found)
        if full:
            self._forget_gone(now)
            self._next_full_scan[pid] = now + FULL_SCAN_PERIOD_S
        self._parents[pid] = parents
        return kids

    def _forget_gone(self, now: float) -> None:
        """Drop the processes not asked about for a whole period (they ended)."""
        for pid, due in list(self._next_full_scan.items()):
            if due < now - FULL_SCAN_PERIOD_S:
                del self._next_full_scan[pid]
                self._parents.pop(pid, None)


def procfs_children_supported() -> bool:
    """Whether this kernel has the children files (Linux 3.5+ with CONFIG_PROC_CHILDREN)."""
    pid = os.getpid()
    return os.path.exists(f"/proc/{pid}/task/{pid}/children")


def _unknown_wait(pid: int) -> int | None:
    return None  # a fake psutil's processes have no /proc files


class _Tracked:
    def __init__(self, process: Any) -> None:
        self.process = process
        self.io_bytes: tuple[int, int] | None = None
        self.io_t = 0.0
        self.run_wait: tuple[int, float] | None = None  # (ns waited so far, when read)


class ProcessSampler:
    """Samples ``root_pid`` and its descendants; construct with a fake psutil in tests.

    ``list_children`` finds a process's children; by default the /proc files where the real
    psutil is used and the kernel has them, else psutil's own (slower) search."""

    def __init__(
        self,
        root_pid: int,
        hooked_pids: Callable[[], set[int]] = set,
        psutil_module: Any = None,
        clock: Callable[[], float] = time.monotonic,
        list_children: Callable[[int], list[int]] | None = None,
        read_run_wait: Callable[[int], int | None] | None = None,
    ) -> None:
        if psutil_module is None:
            import psutil as psutil_module

            if list_children is None and procfs_children_supported():
                list_children = ProcfsChildren()
            if read_run_wait is None:
                read_run_wait = run_queue_wait_ns
        self._psutil = psutil_module
        self._list_children = list_children
        self.root_pid = root_pid
        self._hooked_pids = hooked_pids
        self._clock = clock
        self._read_run_wait = read_run_wait or _unknown_wait
        self._tracked: dict[int, _Tracked] = {}
        self._last_pids: frozenset[int] = frozenset()
        # Busy share of all the machine's cores since the previous sample (psutil, 0-100):
        # the advisor counts the cores nobody uses (more DataLoader workers only pay there).
        self.system_cpu_pct: float | None = None
        # The cores the job's root process may use (affinity, cgroup quota; cpu_room.py):
        # the advisor's room for workers, which other processes share with the job.
        self.usable_cores: float | None = None
        self._room_due = float("-inf")
        with contextlib.suppress(Exception):
            self._psutil.cpu_percent(None)  # the first call only starts the delta

    def pids(self) -> set[int]:
        """The PIDs seen in the last sample (the monitor looks for hook sockets among them)."""
        return set(self._last_pids)

    def sample(self) -> tuple[ProcSample, ...]:
        processes = self._tree()
        alive = {p.pid for p in processes}
        for pid in list(self._tracked):
            if pid not in alive:
                del self._tracked[pid]
        hooked = self._hooked_pids()
        samples = []
        for process in processes:
            tracked = self._tracked.get(process.pid)
            fresh = tracked is None
            if tracked is None:
                tracked = self._tracked[process.pid] = _Tracked(process)
                self._prime(tracked)
            sample = self._sample_one(tracked, hooked)
            if fresh and sample is not None:
                # psutil's CPU % is a delta since the previous call: right after the priming
                # one it reads 0% for a busy process. N/A until a whole period has passed.
                sample = replace(sample, cpu_pct=None)
            if sample is not None:
                samples.append(sample)
        self._last_pids = frozenset(s.pid for s in samples)
        self.system_cpu_pct = self._system_cpu()
        self._read_room()
        return tuple(samples)

    def _read_room(self) -> None:
        now = self._clock()
        if now >= self._room_due:
            self._room_due = now + ROOM_PERIOD_S
            self.usable_cores = usable_cores(self.root_pid)

    def _system_cpu(self) -> float | None:
        try:
            return float(self._psutil.cpu_percent(None))
        except Exception:
            return None

    def _tree(self) -> list[Any]:
        errors = (self._psutil.NoSuchProcess, self._psutil.AccessDenied)
        root = self._process(self.root_pid)
        if root is None:
            return []
        if self._list_children is None:
            try:
                return [root, *root.children(recursive=True)]
            except errors:
                return []
        tree, pending = [root], self._list_children(self.root_pid)
        while pending:
            pid = pending.pop(0)
            process = self._process(pid)
            if process is not None:
                tree.append(process)
                pending.extend(self._list_children(pid))
        return tree

    def _process(self, pid: int) -> Any:
        """The kept ``psutil.Process`` of a PID (its CPU delta lives there), or a new one."""
        if pid in self._tracked:
            return self._tracked[pid].process
        try:
            return self._psutil.Process(pid)
        except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
            return None

    def _prime(self, tracked: _Tracked) -> None:
        with contextlib.suppress(Exception):
            tracked.process.cpu_percent(None)  # the first call only starts the CPU delta

    def _sample_one(self, tracked: _Tracked, hooked: set[int]) -> ProcSample | None:
        process = tracked.process
        try:
            with process.oneshot():
                name = process.name()
                cpu = process.cpu_percent(None)
                rss = process.memory_info().rss
                status = process.status()
                ppid = process.ppid()
                read_bps, write_bps = self._io_rates(tracked)
        except (self._psutil.NoSuchProcess, self._psutil.ZombieProcess):
            self._tracked.pop(process.pid, None)
            return None
        except self._psutil.AccessDenied:
            return ProcSample(process.pid, None, "?", "child", None, None, None, None, None)
        role = self._role(process.pid, name, hooked)
        return ProcSample(
            pid=process.pid,
            ppid=ppid,
            name=name,
            role=role,
            cpu_pct=cpu,
            rss_bytes=rss,
            io_read_bps=read_bps,
            io_write_bps=write_bps,
            status=status,
            run_wait_pct=self._run_wait(tracked) if role in RUN_WAIT_ROLES else None,
        )

    def _run_wait(self, tracked: _Tracked) -> float | None:
        """% of one core the process waited for a CPU since the previous sample."""
        waited = self._read_run_wait(tracked.process.pid)
        if waited is None:
            return None
        now = self._clock()
        previous, tracked.run_wait = tracked.run_wait, (waited, now)
        if previous is None or now <= previous[1]:
            return None
        return max(0, waited - previous[0]) / 1e9 / (now - previous[1]) * 100.0

    def _role(self, pid: int, name: str, hooked: set[int]) -> str:
        if pid in hooked:
            return "main"
        if name.startswith(WORKER_NAME):
            return "worker"
        if pid == self.root_pid:
            return "launcher" if hooked else "main"
        return "child"

    def _io_rates(self, tracked: _Tracked) -> tuple[float | None, float | None]:
        try:
            counters = tracked.process.io_counters()
        except (AttributeError, self._psutil.AccessDenied):  # macOS has none; others need root
            return (None, None)
        now = self._clock()
        current = (counters.read_bytes, counters.write_bytes)
        previous, previous_t = tracked.io_bytes, tracked.io_t
        tracked.io_bytes, tracked.io_t = current, now
        if previous is None or now <= previous_t:
            return (None, None)
        elapsed = now - previous_t
        return (
            max(0, current[0] - previous[0]) / elapsed,
            max(0, current[1] - previous[1]) / elapsed,
        )


class ProcessSampling:
    """The process sampler as the monitor runs it: once a second (psutil's CPU % is a delta
    since the previous call), stretched while every core is busy (base.COSTLY)."""

    name = "processes"
    period_s = 1.0
    cost = COSTLY

    def __init__(self, sampler: ProcessSampler) -> None:
        self.sampler = sampler

    def open(self, sink: Sink) -> None:
        self.sample(sink, threading.Event())

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        processes = self.sampler.sample()
        sink.apply(
            events.ProcsSampled(
                processes, self.sampler.system_cpu_pct, usable_cores=self.sampler.usable_cores
            )
        )

    def close(self) -> None:
        pass
