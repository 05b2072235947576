"""``gputop-train attach PID``: a new monitor on a job that outlived its first one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop_train.job.launched import hook_environment
from tests.support import torch_jobs
from tests.support.paths import REPO, SCENARIOS
from tests.support.torch_jobs import ForkedJob
from tests.support.waiting import wait_until

pytest.importorskip("torch")


def start_hooked(scenario: str, *params: str, tmp_path: Path) -> ForkedJob:
    """A job as gputop-train leaves it after "leave it running": hooked, no monitor."""
    log = tmp_path / "job.log"
    return torch_jobs.spawn(
        [str(SCENARIOS), scenario, *params],
        env=hook_environment(os.environ),
        stdout=log,
        stderr=log,
        new_session=True,
    )


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[ForkedJob]:
    job = start_hooked("forever", tmp_path=tmp_path)
    yield job
    if job.poll() is None:
        job.kill()
    job.wait()


def attach(*args: str, wait_s: float | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "attach", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def wait_for_socket(pid: int, timeout_s: float = 30.0) -> None:
    from gputop_train import wire

    socket = wire.socket_path(pid, wire.runtime_dir(create=False))
    wait_until(socket.exists, timeout_s, what="the job opened its hook socket")


def test_ctrl_c_detaches_and_leaves_the_job_running(running_job: ForkedJob, tmp_path: Path) -> None:
    wait_for_socket(running_job.pid)
    recording = tmp_path / "attached.jsonl"
    monitor = attach(
        str(running_job.pid), "--headless", "--format", "json", "--interval", "0.5",
        "--record", str(recording),
    )  # fmt: skip
    before = []  # the statuses up to the first one with a step rate: then detach
    for line in monitor.stdout:
        before.append(line)
        status = json.loads(line)
        if status["type"] == "status" and status.get("samples_per_s"):
            break
    monitor.send_signal(signal.SIGINT)  # Ctrl+C: for an attached monitor, detach
    out, err = monitor.communicate(timeout=30)
    assert monitor.returncode == 0, err
    assert running_job.poll() is None  # the job was not touched
    assert f"job PID {running_job.pid} keeps running" in err
    statuses = [json.loads(line) for line in [*before, *out.splitlines()]]
    assert any(s.get("samples_per_s") for s in statuses if s["type"] == "status")
    assert statuses[-1]["type"] == "summary" and statuses[-1]["total_steps"] > 0
    assert recording.exists() and Path(f"{recording.with_suffix('')}.summary.md").exists()


def test_the_job_ending_ends_the_attached_monitor(tmp_path: Path) -> None:
    job = start_hooked("late_monitor", "steps=20", "idle_s=6", tmp_path=tmp_path)
    wait_for_socket(job.pid)
    monitor = attach(str(job.pid), "--headless", "--format", "json", "--no-record")
    out, err = monitor.communicate(timeout=60)
    job.wait()
    summary = json.loads(out.splitlines()[-1])
    assert monitor.returncode == 0, err
    assert summary["total_steps"] == 20  # the ring's backlog: steps from before the attach
    assert summary["job_running"] is False and summary["exit_code"] is None  # not our child


def test_a_pid_that_does_not_exist_is_refused_with_the_reason() -> None:
    missing = 2**22 + 12345  # above the default pid_max
    result = attach(str(missing))
    _, err = result.communicate(timeout=30)
    assert result.returncode == 2 and f"no process with PID {missing}" in err


def test_a_process_that_is_not_python_is_refused_with_what_to_do() -> None:
    plain = subprocess.Popen(["sleep", "30"])
    try:
        result = attach(str(plain.pid))
        _, err = result.communicate(timeout=30)
    finally:
        plain.kill()
        plain.wait()
    assert result.returncode == 2
    # Said at once, before py-spy is tried: not Python (or, where /proc cannot tell, py-spy's
    # reason: not Python, or no ptrace rights).
    assert "not a Python process" in err or "ptrace" in err


def test_a_job_without_the_hook_is_watched_through_py_spy(tmp_path: Path) -> None:
    from gputop_train.collect.stacks import StackSampler, StacksUnavailable

    # The loop waits ~75% of each step for its one worker: 30 ms batches, 10 ms steps.
    params = ("workers=1", "batch_ms=30", "step_ms=10", "steps=100000")
    log = tmp_path / "job.log"
    job = torch_jobs.spawn(
        [str(SCENARIOS), "sleepy", *params], env=dict(os.environ), stdout=log, stderr=log
    )
    try:
        try:
            # Past the imports: the loop has started its DataLoader worker (a loaded machine
            # only makes this longer; py-spy windows of the imports read no data wait).
            wait_until(lambda: psutil.Process(job.pid).children(), 90, "the job's worker")
            StackSampler(job.pid).check()
        except StacksUnavailable as error:
            pytest.skip(f"py-spy cannot sample here: {error}")
        monitor = subprocess.Popen(
            [
                *(sys.executable, "-m", "gputop_train", "attach", str(job.pid)),
                *("--headless", "--format", "json", "--stack-window", "3", "--no-record"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        windows: list[dict] = []  # each new py-spy window, as the status lines carry it

        def settled() -> bool:
            # Three windows at least (the first may still see the start-up), read until one
            # is near the truth: on a loaded 2-core box the loop's 10 ms of compute stretches
            # and a window read 34.9% (2026-11-27, the whole suite beside it).
            return len(windows) >= 3 and 40.0 <= (windows[-1]["data_wait_pct"] or 0.0) <= 95.0

        deadline = time.monotonic() + 90
        assert monitor.stdout is not None
        while not settled() and time.monotonic() < deadline:
            line = monitor.stdout.readline()
            if line.startswith("{"):
                status = json.loads(line)
                if status.get("stacks") and (
                    not windows or status["stacks"] != windows[-1]["stacks"]
                ):
                    windows.append(status)
        sampled = windows[-1] if windows else None
        monitor.send_signal(signal.SIGINT)  # detach
        _, err = monitor.communicate(timeout=30)
    finally:
        job.kill()
        job.wait()
    assert "is not listening for gputop-train" in err and "sampled with py-spy" in err
    assert sampled is not None, err
    assert sampled["data_wait_source"] == "py-spy"
    assert sampled["stacks"]["thread"].startswith("MainThread")
    assert 40.0 <= sampled["data_wait_pct"] <= 95.0  # the loop's truth is ~75%
    assert sampled["samples_per_s"] is None  # step figures need the hook: N/A, not 0


def test_an_attached_monitor_serves_prometheus_metrics(
    running_job: ForkedJob,
) -> None:
    import re
    import urllib.request

    wait_for_socket(running_job.pid)
    monitor = attach(
        str(running_job.pid), "--headless", "--no-record", "--prometheus", "127.0.0.1:0",
        "--prometheus-job", "attached",
    )  # fmt: skip
    try:
        url = ""
        deadline = time.monotonic() + 30
        while not url and time.monotonic() < deadline:
            line = monitor.stderr.readline()
            found = re.search(r"Prometheus metrics at (\S+)", line)
            url = found.group(1) if found else ""
        assert url.startswith("http://127.0.0.1:"), "the monitor never said where its metrics are"
        # Read until the job's steps are counted, on a deadline of its own: beside CPU hogs
        # the first scrapes came before any step had reached the monitor (dev box, 2026-11-27).
        counted = re.compile(
            rf'gputop_train_steps_total\{{.*pid="{running_job.pid}".*train_job="attached"\}} [1-9]'
        )
        body, deadline = "", time.monotonic() + 60
        while not counted.search(body) and time.monotonic() < deadline:
            time.sleep(0.5)
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read().decode()
        assert counted.search(body), body[-2000:]
    finally:
        monitor.send_signal(signal.SIGINT)  # detach: the job goes on
        monitor.communicate(timeout=30)
    assert running_job.poll() is None


def test_hooked_jobs_are_the_live_processes_behind_the_sockets(private_runtime_dir: Path) -> None:
    from types import SimpleNamespace

    from gputop_train.job.attached import hooked_jobs

    class Gone(Exception):
        pass

    # 13: its socket outlived it; 16: its socket outlived it and a new process has its PID.
    states = {11: "running", 12: "zombie", 14: "sleeping", 16: "running"}

    def process(pid: int) -> SimpleNamespace:
        if pid not in states:
            raise Gone(pid)
        started = time.time() + (60 if pid == 16 else -60)
        return SimpleNamespace(
            status=lambda: states[pid],
            cmdline=lambda: ["python3", f"job{pid}.py"],
            name=None,
            create_time=lambda: started,
        )

    fake_psutil = SimpleNamespace(Process=process, Error=Gone, STATUS_ZOMBIE="zombie")
    assert hooked_jobs(fake_psutil) == []  # no directory yet: no jobs, no error
    private_runtime_dir.mkdir(mode=0o700)
    for name in ("14.sock", "11.sock", "12.sock", "13.sock", "16.sock", "notes.sock", "15.txt"):
        (private_runtime_dir / name).touch()
    listed = hooked_jobs(fake_psutil)
    assert listed == [(11, ["python3", "job11.py"]), (14, ["python3", "job14.py"])]
