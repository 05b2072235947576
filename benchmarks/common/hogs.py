"""CPU hogs beside a job: busy loops, each in its own session and bounded by ``timeout`` so that
none outlives a benchmark that dies, all gone when the block ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

BUSY_LOOP = "while True: pass"


def start_hogs(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """``count`` busy loops, each killed by ``timeout`` after ``seconds`` at the latest."""
    command = ["timeout", f"{seconds:.0f}", sys.executable, "-c", BUSY_LOOP]
    return [subprocess.Popen(command, start_new_session=True) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the hogs and reap them."""
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait()


@contextmanager
def cpu_hogs(count: int, seconds: float) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` hogs for the block (bounded by ``seconds``), stopped on the way out."""
    hogs = start_hogs(count, seconds)
    try:
        yield hogs
    finally:
        stop_hogs(hogs)
