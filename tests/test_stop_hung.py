"""A job that will not stop (issue 37): Ctrl+C reaches it and it stays, as an NCCL job does
when one rank leaves a collective. The monitor says where each rank waits, then SIGTERM, then
SIGKILL of every process of the job, and never exits leaving one; attached, it never kills.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gputop_train.job import attached, launched, stop_ladder
from gputop_train.job.attached import AttachedJob
from gputop_train.job.launched import start_job
from tests.support.torchrun import SCENARIO, standalone_torchrun
from tests.support.waiting import wait_until

# A launcher whose worker is in a session of its own, as torchrun starts its ranks: the
# launcher exits on SIGINT, the worker heeds neither SIGINT nor SIGTERM and never exits.
LAUNCHER = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
open(sys.argv[2], "w").write(str(worker.pid))
while True:
    time.sleep(0.05)
"""
WORKER = """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(0.05)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def short_graces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ladder's graces at 1 s each: the steps and their order are what is tested."""
    monkeypatch.setattr(stop_ladder, "STOP_GRACE_S", (1.0, 1.0))
    monkeypatch.setattr(attached, "STOP_GRACE_S", (1.0, 1.0))


def test_ctrl_c_that_a_rank_does_not_heed_climbs_to_sigkill_of_every_process(
    tmp_path: Path, short_graces: None
) -> None:
    marker = tmp_path / "worker.pid"
    log = os.open(tmp_path / "job.log", os.O_WRONLY | os.O_CREAT, 0o600)
    job = start_job([sys.executable, "-c", LAUNCHER, WORKER, str(marker)], log_fd=log)
    os.close(log)
    said: list[str] = []
    job.tell = said.append
    job.where_waiting = lambda: "rank 0 waits in all_reduce (last step 7); stacks in X"
    wait_until(lambda: marker.exists() and marker.read_text(), what="the worker started")
    worker = int(marker.read_text())
    assert job.interrupt() == "SIGINT"
    job.wait()  # returns once every process of the job is gone
    assert not _alive(worker) and not _alive(job.pid)
    assert said[0].startswith("the job has not exited 1 s after SIGINT")
    assert said[1] == "rank 0 waits in all_reduce (last step 7); stacks in X"
    assert said[2:] == [
        "sent SIGTERM to the job's processes; SIGKILL in 1 s",
        "sent SIGKILL to the job's processes",
    ]


def test_a_job_that_heeds_ctrl_c_is_not_escalated(tmp_path: Path, short_graces: None) -> None:
    log = os.open(tmp_path / "job.log", os.O_WRONLY | os.O_CREAT, 0o600)
    ready = tmp_path / "ready"
    script = f"import time; open({str(ready)!r}, 'w').close()\nwhile True: time.sleep(0.05)"
    job = start_job([sys.executable, "-c", script], log_fd=log)
    os.close(log)
    said: list[str] = []
    job.tell = said.append
    wait_until(ready.exists, what="the job started")
    job.interrupt()
    assert job.wait() == 128 + signal.SIGINT  # its KeyboardInterrupt
    assert said == []


def test_attached_a_job_that_does_not_stop_is_told_about_never_killed(
    tmp_path: Path, short_graces: None
) -> None:
    process = subprocess.Popen([sys.executable, "-c", WORKER])
    try:
        job = AttachedJob(psutil.Process(process.pid))
        said: list[str] = []
        job.tell = said.append
        job.where_waiting = lambda: "rank 1 is in no collective (last step 3); stacks in X"
        wait_until(lambda: launched.ignores_signal(process.pid, signal.SIGINT), what="armed")
        job.stop()
        assert process.poll() is None  # still running: not ours to kill
        assert said[0].startswith(f"PID {process.pid} has not exited 1 s after SIGINT")
        assert f"kill -TERM {process.pid}" in said[0]
        assert said[1] == "rank 1 is in no collective (last step 3); stacks in X"
    finally:
        process.kill()
        process.wait()


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_ctrl_c_on_a_torchrun_job_with_a_rank_that_never_exits_leaves_no_process(
    tmp_path: Path,
) -> None:
    """The monitor as a user runs it: gloo ranks under torchrun, rank 1 heeding no signal."""
    tag = f"tag={tmp_path.name}"
    monitor = subprocess.Popen(
        [
            sys.executable, "-m", "gputop_train", "--headless", "--format", "json",
            "--interval", "1", "--no-record", "--", *standalone_torchrun(2), str(SCENARIO),
            "ddp", "steps=100000", "slow_rank=1", "hang_on_sigint=1", tag,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def job_processes() -> list[int]:
        return [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if p.pid != monitor.pid and tag in " ".join(p.info["cmdline"] or ())
        ]

    try:
        assert monitor.stdout is not None
        for line in monitor.stdout:  # until both ranks have stepped
            if '"total_steps": ' in line and '"total_steps": 0,' not in line:
                break
        assert len(job_processes()) >= 3  # torchrun's agent and its two ranks
        monitor.send_signal(signal.SIGINT)
        _, err = monitor.communicate(timeout=120)
    finally:
        if monitor.poll() is None:
            monitor.kill()
    assert [p for p in job_processes() if _alive(p)] == []
    said = [line.removeprefix("gputop-train: ") for line in err.splitlines()]
    where = said[said.index(next(s for s in said if s.endswith("where each rank waits:"))) + 1]
    assert "rank 1 " in where and "stacks in " in where  # the hung rank, from its hook
    assert "sent SIGKILL to the job's processes" in err


def test_a_job_that_ends_at_once_on_ctrl_c_is_waited_for_whenever_the_ladder_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside two CPU hogs (2-core box, 2026-11-27) the niced monitor was preempted between
    publishing the ladder's thread and starting it, the job had ended at its SIGINT, and the
    job's waiter joined the unstarted thread: RuntimeError, its thread died, and the headless
    monitor never exited (1 Ctrl+C of 2-8). Here the waiter runs at that very moment."""
    log = os.open(tmp_path / "job.log", os.O_WRONLY | os.O_CREAT, 0o600)
    ready = tmp_path / "ready"
    script = f"import time; open({str(ready)!r}, 'w').close()\nwhile True: time.sleep(0.05)"
    job = start_job([sys.executable, "-c", script], log_fd=log)
    os.close(log)
    wait_until(ready.exists, what="the job started")
    waited: list[int | None] = []
    start = launched.threading.Thread.start

    def start_late(thread: launched.threading.Thread) -> None:
        if thread.name == "gputop-train-stop":
            job.process.wait()  # the job ended at its SIGINT before the ladder started
            waited.append(job.wait())
        start(thread)

    monkeypatch.setattr(launched.threading.Thread, "start", start_late)
    job.interrupt()
    assert waited == [128 + signal.SIGINT]
    assert job.wait() == 128 + signal.SIGINT
