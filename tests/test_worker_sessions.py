"""The test workers run in sessions of their own, so no monitor under test lowers the runner's
session (tests/support/worker_sessions.py; issue 46)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.paths import REPO


@pytest.mark.skipif("PYTEST_XDIST_WORKER" not in os.environ, reason="a serial run has no worker")
def test_a_worker_leads_a_session_of_its_own_outside_the_runners() -> None:
    assert os.getsid(0) == os.getpid()
    assert os.getsid(os.getppid()) != os.getpid()  # the runner stays in the terminal's


def test_ctrl_c_of_the_runner_reaches_what_a_workers_test_started(tmp_path: Path) -> None:
    """The terminal's SIGINT reaches only the runner's process group now: the runner passes it
    on to each worker's group, so a Ctrl+C still ends what a test started there (a monitor, a
    job), as it did with the workers in the terminal's group; xdist alone would end the
    workers and leave those running."""
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    child_pid = tmp_path / "child.pid"
    (tmp_path / "test_inner.py").write_text(
        "import pathlib, subprocess, time\n"
        "def test_waits_on_a_child():\n"
        "    child = subprocess.Popen(['sleep', '120'])\n"
        f"    pathlib.Path({str(child_pid)!r}).write_text(str(child.pid))\n"
        "    child.wait()\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "-q",
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not child_pid.exists() and time.monotonic() < deadline and runner.poll() is None:
        time.sleep(0.1)
    assert child_pid.exists(), runner.communicate()[0]
    child = psutil.Process(int(child_pid.read_text()))
    try:
        runner.send_signal(signal.SIGINT)  # to the runner alone, as the terminal now does
        output = runner.communicate(timeout=60)[0]
        assert "KeyboardInterrupt" in output, output
        gone, _ = psutil.wait_procs([child], timeout=10)
        assert gone, "the test's child outlived the Ctrl+C"
    finally:
        with contextlib.suppress(psutil.Error):
            child.kill()
