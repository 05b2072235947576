"""A signal handler runs on the main thread between two of its bytecodes: headless's
(cli/drive.py) must not take the session's lock, which that thread may hold (a Ctrl+C during a
snapshot deadlocked the monitor, and the job ran on)."""

from __future__ import annotations

import io
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from gputop_train.cli.drive import drive_headless
from gputop_train.collect.fake import FakeNvml
from gputop_train.monitor.monitor import Monitor
from gputop_train.session.model import Session


class InterruptibleJob:
    """A launched job that ends with 130 once interrupted."""

    pid = os.getpid()
    owned = True

    def __init__(self) -> None:
        self.interrupted = threading.Event()
        self.tell: Callable[[str], None] = lambda text: None
        self.where_waiting: Callable[[], str | None] = lambda: None

    def running(self) -> bool:
        return not self.interrupted.is_set()

    def wait(self) -> int | None:
        self.interrupted.wait(30.0)
        return 130

    def interrupt(self) -> str:
        self.interrupted.set()
        return "SIGINT"

    def stop(self) -> None:
        self.interrupted.set()

    def terminate(self) -> str:
        self.interrupted.set()
        return "SIGTERM"


@pytest.mark.timeout(60)
def test_ctrl_c_inside_a_snapshot_stops_the_job_and_is_recorded() -> None:
    session = Session(command=("train.py",))
    monitor = Monitor(session, os.getpid(), nvml=FakeNvml([]), samplers=[])
    snapshot, asked = session.snapshot, list[bool]()

    def snapshot_interrupted(*args: Any, **kwargs: Any) -> Any:
        if not asked:  # the first one: Ctrl+C arrives while the session's lock is held
            asked.append(True)
            with session._lock:
                signal.raise_signal(signal.SIGINT)
        return snapshot(*args, **kwargs)

    session.snapshot = snapshot_interrupted  # type: ignore[method-assign]
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    err, job = io.StringIO(), InterruptibleJob()
    try:
        code = drive_headless(job, monitor, 0.05, 10.0, as_json=False, out=io.StringIO(), err=err)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert job.interrupted.is_set() and code == 130
    assert "gputop-train: sent SIGINT to the job; Ctrl+C again sends SIGTERM" in err.getvalue()
    final = snapshot()
    assert final.job.stopped_by == "Ctrl+C" and not final.job.failed
