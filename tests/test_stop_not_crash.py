"""A user's stop is "stopped", never "crashed": torchrun exits 1 after SIGINT or SIGTERM
(issue 45: 10 of 28 stopped runs read as crashes, and the cluster's Crashed alert fired)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gputop_train import events
from gputop_train.export.families import JOB_FAMILIES, Family
from gputop_train.record import reader
from gputop_train.session.job_end import stop_seen
from gputop_train.session.model import Session
from gputop_train.views import view_of
from tests.support.paths import REPO
from tests.support.torchrun import SCENARIO, standalone_torchrun

# torchrun 2.14's last lines after a SIGINT to its agent (the dev box, 2026-12-05).
TORCHRUN_TAIL = (
    "W1205 11:03:26.318000 21377 torch/distributed/elastic/agent/server/api.py:753] Received 2"
    " death signal, shutting down workers",
    '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 21377 got signal: 2",
)


def test_torchruns_exit_1_after_its_sigint_reads_as_a_stop() -> None:
    assert stop_seen(1, TORCHRUN_TAIL) == "SIGINT (seen by torchrun)"
    assert stop_seen(1, ("... Received Signals.SIGTERM death signal, shutting down",)) == (
        "SIGTERM (seen by torchrun)"
    )


def test_a_shells_signal_status_reads_as_a_stop_and_a_crash_as_none() -> None:
    assert stop_seen(130, ()) == "SIGINT (seen)"
    assert stop_seen(-signal.SIGTERM, ()) == "SIGTERM (seen)"
    assert stop_seen(1, ("Traceback (most recent call last):", "ValueError: bad batch")) is None
    assert stop_seen(0, TORCHRUN_TAIL) is None


def test_an_interrupt_in_the_hooks_start_up_reads_as_a_stop() -> None:
    """SIGINT while Python imports the hook's sitecustomize: exit status 1 (issue 46)."""
    tail = (
        "Fatal Python error: init_import_site: Failed to import the site module",
        "Python runtime state: initialized",
        "Traceback (most recent call last):",
        '  File "<frozen site>", line 548, in execsitecustomize',
        "KeyboardInterrupt",
    )
    assert stop_seen(1, tail) == "SIGINT (seen)"
    session = Session()
    session.apply(events.JobEnded(1, tail))
    assert not session.snapshot().job.failed


def _job_stopped(session: Session) -> float | None:
    family = next(f for f in JOB_FAMILIES if isinstance(f, Family) and f.name == "job_stopped")
    return family.value(view_of(session.snapshot()))


def test_the_exporter_serves_a_stop_and_a_crash_apart() -> None:
    stopped, crashed = Session(), Session()
    stopped.apply(events.JobEnded(1, TORCHRUN_TAIL))
    crashed.apply(events.JobEnded(1, ("ValueError: bad batch",)))
    assert not stopped.snapshot().job.failed and crashed.snapshot().job.failed
    assert _job_stopped(stopped) == 1.0
    assert _job_stopped(crashed) == 0.0


@pytest.mark.timeout(300)  # torchrun's start on a loaded 2-core box
def test_a_torchrun_job_sent_sigint_by_someone_else_ends_stopped(tmp_path: Path) -> None:
    """A real torchrun of two gloo ranks under a headless monitor; its agent is sent SIGINT
    from outside (a user's `kill -INT`, a scheduler): the recording's job ended stopped."""
    record = tmp_path / "run.jsonl"
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--record", str(record), "--headless",
         "--interval", "1", "--", *standalone_torchrun(2), str(SCENARIO), "ddp", "steps=100000"],
        cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "monitor.err").open("w"),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            text = record.read_text() if record.exists() else ""
            if text.count('"kind": "steps"') >= 2:
                break
            assert monitor.poll() is None, (tmp_path / "monitor.err").read_text()
            time.sleep(0.5)
        agent = next(
            p for p in psutil.Process(monitor.pid).children(recursive=True)
            if "torch.distributed.run" in " ".join(p.cmdline())
        )  # fmt: skip
        os.kill(agent.pid, signal.SIGINT)
        code = monitor.wait(timeout=120)
    finally:
        if monitor.poll() is None:
            monitor.kill()
    assert code == 1  # torchrun's own exit status after a SIGINT
    job = reader.replay_all(reader.read(record)).snapshot().job
    assert job.exit_code == 1 and job.stopped_by == "SIGINT (seen by torchrun)"
    assert not job.failed
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    assert "crash" not in json.dumps(summary).lower()
