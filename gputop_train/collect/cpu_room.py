"""The cores a process may use: its CPU affinity and its cgroup's CPU quota.

A job pinned to 4 of 16 cores (taskset, a scheduler's cpuset) or held to 2 cores by its
container's quota cannot use the machine's idle cores: the advisor sizes DataLoader workers
by these, not by ``os.cpu_count()``. Read from the kernel's files, no library: affinity by
``os.sched_getaffinity``; the quota from cgroup v2 ``cpu.max`` ("max 100000" or
"200000 100000") or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: none), the
smallest along the process's cgroup path (a parent's quota bounds its children).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores(pid: int, proc: Path = Path("/proc"), root: Path = CGROUP_ROOT) -> float | None:
    """The cores ``pid`` may run on: its affinity, bounded by its cgroup CPU quota; None
    where neither can be read (not Linux, the process gone)."""
    affinity = _affinity(pid)
    quota = cgroup_quota(pid, proc, root)
    known = [value for value in (affinity, quota) if value is not None]
    return min(known) if known else None


def _affinity(pid: int) -> float | None:
    try:
        return float(len(os.sched_getaffinity(pid)))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return None


def cgroup_quota(pid: int, proc: Path = Path("/proc"), root: Path = CGROUP_ROOT) -> float | None:
    """Cores' worth of the CPU quota of ``pid``'s cgroup and its parents; None: no quota."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    quotas: list[float] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one hierarchy
            quotas += _along(root, path, _v2_quota)
        elif "cpu" in controllers.split(","):
            for mount in (root / controllers, root / "cpu", root / "cpu,cpuacct"):
                if mount.is_dir():
                    quotas += _along(mount, path, _v1_quota)
                    break
    return min(quotas) if quotas else None


def _along(mount: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """The quota at each level from the cgroup up to the mount's root. Inside a container the
    path names the host's hierarchy: where it is absent, the mount's root is the cgroup."""
    found: list[float] = []
    parts = [part for part in path.strip("/").split("/") if part]
    for depth in range(len(parts), -1, -1):
        directory = mount.joinpath(*parts[:depth])
        if directory.is_dir():
            value = read(directory)
            if value is not None:
                found.append(value)
    return found


def _v2_quota(directory: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        quota, period = (directory / "cpu.max").read_text().split()[:2]
        if quota != "max" and int(period) > 0:
            return int(quota) / int(period)
    return None


def _v1_quota(directory: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    return None
