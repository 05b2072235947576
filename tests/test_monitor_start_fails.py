"""A monitor that fails as it starts, after it launched the job, hands the job over and says
so: the job runs on, hooked, for ``attach`` (issue 46: a lost GPU's traceback at start left the
job running unwatched, with nothing said)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil
import pytest

from gputop_train import cli
from gputop_train.cli import run
from tests.support.paths import REPO

LOOPS = REPO / "tests" / "scenarios" / "loops.py"


def test_a_monitor_that_fails_at_start_leaves_its_job_running_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a sampler failed to open")

    monkeypatch.setattr(run, "_start_monitor", fails)
    args = cli.parse_args(
        ["--headless", "--record", str(tmp_path / "run.jsonl"), str(LOOPS), "forever"]
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(RuntimeError, match="a sampler failed to open"):
        run.launch(args)
    err = capsys.readouterr().err
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    try:
        assert (
            "the monitor failed as it started (below); the job it launched is left running" in err
        )
        pids = [int(word) for word in err.split("job PID ")[1].split()[:1]]
        assert pids and psutil.pid_exists(pids[0]), err  # it runs on
        assert f"gputop-train attach {pids[0]}" in err
        assert (tmp_path / "run.summary.json").exists()
    finally:
        started += [
            p
            for p in psutil.Process().children(recursive=True)
            if p.pid not in before | {q.pid for q in started}
        ]
        for process in started:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(started, timeout=30)
