"""Ctrl+C while the monitor starts is handled as Ctrl+C later (issue 39: a traceback, and a
started job left running unwatched): a job we started gets SIGINT and is watched as it
stops; before the job starts, nothing is started. The Ctrl+C is sent from inside the start-up
path (a patched step of it), so it lands there on any machine, at any load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from gputop_train.cli.held_interrupts import HeldInterrupts
from tests.support.paths import REPO, SCENARIOS

# Runs gputop-train headless with one start-up step wrapped to send SIGINT to itself first.
MONITOR = """
import os, signal, sys
from gputop_train.cli import main, run
step = sys.argv[1]
original = getattr(run, step)
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return original(*args, **kwargs)
setattr(run, step, interrupted)
sys.exit(main(sys.argv[2:]))
"""


def _monitor(step: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MONITOR, step, "--headless", "--no-record", *args],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


def test_ctrl_c_while_the_monitor_starts_stops_the_started_job_as_ctrl_c_later() -> None:
    job = (str(SCENARIOS), "sleepy", "batch_ms=5", "step_ms=5", "steps=1000000")
    result = _monitor("_start_monitor", *job)
    assert "interrupted (Ctrl+C) while starting: sent SIGINT to the job" in result.stderr
    assert "gputop_train/cli" not in result.stderr, result.stderr[-3000:]  # no traceback of ours
    # Watched to its end: where the SIGINT found it decides its code (130 in the loop, 1 while
    # it still imported torch), never "keeps running".
    assert "job exit code" in result.stdout and "keeps running" not in result.stderr
    assert result.returncode != 0, result.stdout[-2000:]


def test_ctrl_c_before_the_job_starts_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = _monitor("_open_outputs", str(script))
    assert "before the job started: it was not started" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert result.returncode == 130 and not marker.exists()


def test_interrupts_taken_while_starting_stay_held_until_a_front_end_replaces_the_handler() -> None:
    """Between the start-up's check and the headless front end's own handlers, a Ctrl+C
    raised KeyboardInterrupt (the default handler was back): the monitor vanished, its job
    and relay left running (issue 46). ``take`` reads the count and keeps holding."""
    held = HeldInterrupts().hold()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert held.take() == 1
        os.kill(os.getpid(), signal.SIGINT)  # still held: no KeyboardInterrupt
        assert held.take() == 1
    finally:
        held.release()
