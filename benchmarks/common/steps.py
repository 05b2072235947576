"""Step times as a job writes them: each step's end (perf_counter), a float64 appended to a
file (tests/scenarios/loops.py's ``times=``, busy_box's job)."""

from __future__ import annotations

import struct
from pathlib import Path


def step_ends(times: Path) -> list[float]:
    """The job's step ends so far, as the job's times file holds them (float64s of the
    job's perf_counter: the same clock as a benchmark's on this machine)."""
    data = times.read_bytes()
    return list(struct.unpack(f"{len(data) // 8}d", data[: len(data) // 8 * 8]))
