"""SIGTERM to the monitor stops a job it started, as ``timeout`` and schedulers expect; SIGHUP
still leaves it running; no socket is left behind; the clock stops with the job (issue 29)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_train import wire
from tests.support.terminal import Terminal

# Monitors of real CPU jobs: on a loaded 2-core box some took over 120 s.
pytestmark = pytest.mark.timeout(300)

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
LOOPS = REPO / "tests" / "scenarios" / "loops.py"
IGNORES_SIGTERM = (
    "import signal, time, torch\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), 0.1)\n"
    "while True:\n"
    "    m(torch.ones(1, 2)).sum().backward(); o.step(); time.sleep(0.01)\n"
)


def _monitor(tmp_path: Path, *command: str) -> subprocess.Popen[bytes]:
    """A headless monitor recording to run.jsonl; its output in files."""
    return subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--record", str(tmp_path / "run.jsonl"),
         "--headless", "--interval", "0.5", *command],
        cwd=REPO, start_new_session=True,
        stdout=(tmp_path / "monitor.out").open("w"), stderr=(tmp_path / "monitor.err").open("w"),
    )  # fmt: skip


def _tui(tmp_path: Path, *command: str) -> Terminal:
    """The TUI in an 80x24 pty, recording to run.jsonl."""
    return Terminal(
        [sys.executable, "-m", "gputop_train", "--record", str(tmp_path / "run.jsonl"), *command]
    )


def _job_pid(record: Path, timeout_s: float = 180.0, drain: Terminal | None = None) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if drain is not None:
            drain.drain()
        if record.exists():
            steps = sum(1 for line in record.open() if '"kind": "steps"' in line)
            hellos = [
                json.loads(line)["pid"] for line in record.open() if '"kind": "hello"' in line
            ]
            if hellos and steps >= 2:
                return hellos[0]
        time.sleep(0.2)
    raise AssertionError("the job never stepped")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _no_socket_left(pid: int) -> bool:
    return not wire.socket_path(pid, wire.runtime_dir(create=False)).exists()


def test_sigterm_stops_a_launched_job_and_leaves_no_socket(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, str(LOOPS), "forever")
    try:
        pid = _job_pid(tmp_path / "run.jsonl")
        monitor.send_signal(signal.SIGTERM)
        code = monitor.wait(timeout=60)
    finally:
        if monitor.poll() is None:
            monitor.kill()
    assert _gone(pid), "the job outlived a SIGTERM of its monitor"
    assert _no_socket_left(pid)
    assert code == 128 + signal.SIGTERM  # the job's own status, as a shell reports it
    err = (tmp_path / "monitor.err").read_text()
    assert "sent SIGTERM to the job" in err
    stops = [json.loads(line) for line in (tmp_path / "run.jsonl").open() if '"stop"' in line]
    assert [stop["reason"] for stop in stops] == ["SIGTERM"]  # a stop asked for: no failure
    assert (tmp_path / "run.summary.json").exists()


def test_a_second_sigterm_kills_a_job_that_ignores_the_first(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, "--", sys.executable, "-c", IGNORES_SIGTERM)
    try:
        pid = _job_pid(tmp_path / "run.jsonl")
        monitor.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert not _gone(pid)  # it ignores SIGTERM: the grace period runs
        monitor.send_signal(signal.SIGTERM)
        code = monitor.wait(timeout=30)
    finally:
        if monitor.poll() is None:
            monitor.kill()
    assert _gone(pid) and code == 128 + signal.SIGKILL
    assert _no_socket_left(pid)


def test_sighup_still_leaves_the_job_running(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, str(LOOPS), "forever")
    pid = None
    try:
        pid = _job_pid(tmp_path / "run.jsonl")
        monitor.send_signal(signal.SIGHUP)
        monitor.wait(timeout=30)
        assert not _gone(pid) and not _no_socket_left(pid)  # running, and attachable
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        if monitor.poll() is None:
            monitor.kill()


def test_sigterm_to_the_tui_stops_a_launched_job_too(tmp_path: Path) -> None:
    terminal = _tui(tmp_path, str(LOOPS), "forever")
    try:
        pid = _job_pid(tmp_path / "run.jsonl", drain=terminal)
        terminal.process.send_signal(signal.SIGTERM)
        terminal.read(60.0)  # until the monitor has ended
    finally:
        terminal.close()
    assert _gone(pid) and _no_socket_left(pid)


def test_the_clock_stops_with_the_job(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, str(LOOPS), "sleepy", "steps=30", "batch_ms=5", "step_ms=5")
    code = monitor.wait(timeout=120)
    assert code == 0
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    events = [json.loads(line) for line in (tmp_path / "run.jsonl").open()]
    started = events[0]["started_at"]
    ended = next(e for e in events if e["kind"] == "job_ended")
    assert ended["at"] is not None and ended["at"] < ended["t"]  # before the drain's seconds
    assert summary["duration_s"] == pytest.approx(ended["at"] - started, abs=0.15)
