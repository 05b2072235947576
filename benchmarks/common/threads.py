"""Per-thread CPU accounting of a process, from /proc and py-spy."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of ``pid``: nanoseconds on a CPU and times scheduled, so far."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns, _, slices = (task / "schedstat").read_text().split()[:3]
            found[int(task.name)] = (int(run_ns), int(slices))
        except (OSError, ValueError):
            continue  # a thread that ended
    return found


def thread_names(pid: int) -> dict[int, str]:
    """OS thread id -> Python thread name, from py-spy (empty without it)."""
    try:
        out = subprocess.run(
            ["py-spy", "dump", "--pid", str(pid), "--json"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return {t["os_thread_id"]: t["thread_name"] for t in json.loads(out) if t["os_thread_id"]}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}
