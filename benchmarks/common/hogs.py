"""CPU hogs beside a job: busy loops, each in its own session and bounded by ``timeout`` so that
none outlives a benchmark that dies, all gone when the block ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

BUSY_LOOP = "while True: pass"


@contextmanager
def cpu_hogs(count: int, seconds: float) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy loops for the block, each killed by ``timeout`` after ``seconds`` at the
    latest. On the way out each hog's whole session goes: killing ``timeout`` alone would leave
    its busy loop spinning with nobody left to end it."""
    command = ["timeout", f"{seconds:.0f}", sys.executable, "-c", BUSY_LOOP]
    hogs = [subprocess.Popen(command, start_new_session=True) for _ in range(count)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
        for hog in hogs:
            hog.wait()
