"""The recording never says it holds rows it does not (issue 46).

A launched job's hook appends its own step rows to the recording (hook/row_log.py). When it
cannot (the recording read-only in the job's mount namespace, the job's file size limit, a job
that closes its descriptors) it stopped, but the monitor still left those rows to it: 0, 29%
and 27% of the steps were recorded and the summaries said so. Each cause is made here on a
real job under the real CLI: every step is recorded once (by the hook until it stopped, by the
monitor from then on), the summary counts them all, and the recording says why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.record import reader
from tests.support.paths import REPO, SCENARIOS

STEPS = 600  # ~66 kB of rows: the file size limit below stops the hook about halfway


def _launch(tmp_path: Path, wrapper: list[str], *scenario: str) -> tuple[dict, list[int], str]:
    """The CLI launches ``wrapper`` + the scenario; its summary, the steps recorded (by anyone,
    in order of the lines) and the recording's notices."""
    stem = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "gputop_train", "--headless", "--format", "json",
         "--record", str(stem), "--", *wrapper, sys.executable, str(SCENARIOS), *scenario],
        capture_output=True, text=True, cwd=REPO, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.splitlines()[-1])
    lines = reader.read(stem.with_suffix(".jsonl")).events
    steps = [
        row[0] for line in lines if line.get("kind") == wire.RECORDED_STEPS for row in line["rows"]
    ]
    notices = "\n".join(str(line.get("text")) for line in lines if line.get("kind") == "notice")
    return summary, steps, notices


def _every_step_once(summary: dict, steps: list[int], total: int) -> None:
    assert sorted(steps) == list(range(1, total + 1)), "each row recorded once"
    assert summary["total_steps"] == total


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_file_size_limit_stops_the_hook_and_the_monitor_records_the_rest(
    tmp_path: Path,
) -> None:
    # No bytecode written under the limit: CPython writes a .pyc with one unchecked write, and
    # one cut at the limit breaks every later import of that module.
    limit = ["env", "PYTHONDONTWRITEBYTECODE=1", "prlimit", "--fsize=40000"]
    summary, steps, notices = _launch(tmp_path, limit, "knobbed", f"steps={STEPS}", "step_ms=1")
    _every_step_once(summary, steps, STEPS)
    assert "file size limit (RLIMIT_FSIZE, 40000 bytes)" in notices
    assert "the monitor records them from here on" in notices


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_recording_read_only_in_the_jobs_namespace_is_recorded_by_the_monitor(
    tmp_path: Path,
) -> None:
    recording = tmp_path / "run.jsonl"  # the CLI's recording, made read-only for the job alone
    read_only = (
        f"mount --bind {recording} {recording} && mount -o remount,bind,ro {recording} "
        f'{recording} && exec "$@"'
    )
    wrapper = ["unshare", "-rm", "sh", "-c", read_only, "sh"]
    summary, steps, notices = _launch(tmp_path, wrapper, "knobbed", "steps=60", "step_ms=1")
    _every_step_once(summary, steps, 60)
    assert "cannot open it: Read-only file system" in notices


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_job_that_closes_its_descriptors_has_its_rows_recorded_by_the_monitor(
    tmp_path: Path,
) -> None:
    scenario = ["closefds", f"dir={tmp_path}", "files=2", "close_at=40", "after=60"]
    summary, steps, notices = _launch(tmp_path, [], *scenario)
    _every_step_once(summary, steps, 40 + 2 * 4 + 60)
    assert "its descriptor was closed by the job" in notices
