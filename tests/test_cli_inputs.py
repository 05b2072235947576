"""Bad input at the command line gets a clear message at once (issue 39): a PID that cannot
be one, a TLS file that is a FIFO or a device (it held the launch for ever), and --schedule
entries the job's knobs refuse (said only at the end, twice)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import gputop
from tests.support.paths import SCENARIOS


@pytest.mark.parametrize("pid", ["-5", "0", "abc"])
def test_attach_to_what_cannot_be_a_pid_says_so_without_a_traceback(pid: str) -> None:
    result = gputop("attach", pid, timeout=60)
    assert result.returncode == 2
    assert "is not a PID" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("option", ["--prometheus-tls", "--prometheus-client-ca"])
def test_a_tls_file_that_is_a_fifo_or_a_device_is_refused_at_once(
    option: str, tmp_path: Path
) -> None:
    fifo = tmp_path / "cert.pem"
    os.mkfifo(fifo)
    pem = tmp_path / "real.pem"
    pem.write_text("not read: the launch stops at the FIFO\n")
    script = tmp_path / "train.py"
    script.write_text("")
    for bad, kind in (
        (str(fifo), "a FIFO"),
        ("/dev/null", "a device"),
        (str(tmp_path), "a directory"),
    ):
        files = [bad, bad] if option == "--prometheus-tls" else [bad]
        extra = ["--prometheus-tls", str(pem), str(pem)] if option != "--prometheus-tls" else []
        result = gputop("--prometheus", "0", *extra, option, *files, str(script), timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{bad} is {kind}, not a file" in result.stderr


def test_schedule_entries_the_knobs_refuse_are_said_at_once_and_once() -> None:
    # Long enough for the check to run on a loaded box (it once ran past a 3 s job's end).
    job = (str(SCENARIOS), "sleepy", "batch_ms=5", "step_ms=5", "steps=1000")
    schedule = "5:num_workers=abc,10:bogus=1"
    result = gputop("--headless", "--no-record", "--schedule", schedule, *job)
    assert result.returncode == 0, result.stderr[-2000:]
    for problem in ("num_workers takes a whole number, not 'abc'", "no knob named 'bogus'"):
        said = result.stderr.split("gputop-train: --schedule")
        assert sum(problem in part for part in said) == 1, result.stderr  # on stderr, once
    # The summary's notes say each once: the monitor's check, or the hook's refusal at the
    # entry's step where that came first (a loaded box can reach step 5 before the check).
    notes = [line for line in result.stdout.splitlines() if line.strip().startswith("note:")]
    for knob in ("num_workers", "bogus"):
        assert sum(knob in note for note in notes) == 1, result.stdout
    # Said while the job ran (its own last output, the loop's TRUTH line, comes after).
    assert result.stderr.index("--schedule step 5") < result.stderr.index("TRUTH")
