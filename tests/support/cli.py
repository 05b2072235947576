"""The ``gputop-train`` command, run as a user runs it, from this checkout."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .paths import REPO


def gputop(*args: str, timeout: float = 180.0, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_train", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        **kwargs,
    )


@dataclass
class HeadlessRun:
    """A ``--headless --format json`` run: its status objects, the summary last."""

    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        return self.lines[-1]


def headless_until(
    *args: str, stop_when: Callable[[dict[str, Any]], bool], timeout: float = 180.0
) -> HeadlessRun:
    """``gputop-train --headless --format json ARGS``, Ctrl+C'd (forwarded to the job, which
    ends) at the first status object ``stop_when`` accepts: a test waits for what it checks,
    not for a job long enough to outlast a loaded machine."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile("w+") as err:
        monitor = subprocess.Popen(
            [sys.executable, "-m", "gputop_train", "--headless", "--format", "json", *args],
            stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO,
        )  # fmt: skip
        assert monitor.stdout is not None
        lines: list[dict[str, Any]] = []
        stopped = False
        for text in monitor.stdout:
            lines.append(json.loads(text))
            if not stopped and stop_when(lines[-1]):
                monitor.send_signal(signal.SIGINT)
                stopped = True
            if time.monotonic() > deadline:
                _end(monitor)
                raise AssertionError(f"not done in {timeout:g} s: {lines[-1]}")
        try:
            monitor.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _end(monitor)
            raise
        err.seek(0)
        return HeadlessRun(monitor.returncode, lines, err.read())


def _end(monitor: subprocess.Popen[str]) -> None:
    """A monitor past its test's deadline, ended as a user would: Ctrl+C (it stops the job it
    launched), then SIGTERM, and SIGKILL only last. Killed outright, it left its torchrun job
    and the relay running for 16 minutes beside the rest of the suite (2026-12-06)."""
    for ending in (signal.SIGINT, signal.SIGTERM):
        monitor.send_signal(ending)
        try:
            monitor.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            continue
    monitor.kill()
    monitor.wait()
