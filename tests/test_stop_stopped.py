"""Stopping a job that is itself stopped (SIGSTOP, Ctrl+Z): its own handlers run (issue 31)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from gputop_train.job.launched import LaunchedJob, start_job

HANDLER = """
import signal, sys, time, pathlib
def done(signum, frame):
    pathlib.Path(sys.argv[1]).write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGINT, done)
pathlib.Path(sys.argv[1] + ".ready").touch()
while True:
    time.sleep(0.05)
"""


def test_a_stopped_job_is_continued_so_its_sigint_handler_runs(tmp_path: Path) -> None:
    marker = tmp_path / "handled"
    log = os.open(tmp_path / "job.log", os.O_WRONLY | os.O_CREAT, 0o600)
    job = start_job([sys.executable, "-c", HANDLER, str(marker)], log_fd=log)
    os.close(log)
    assert isinstance(job, LaunchedJob)
    deadline = time.monotonic() + 30
    while not Path(f"{marker}.ready").exists():
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGSTOP)
    job.stop()
    assert job.wait() == 0  # its handler's exit, not SIGKILL's 137
    assert marker.read_text() == "SIGINT"
