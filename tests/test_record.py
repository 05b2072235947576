"""Recording: written as it happens, readable after any death, summarised, replayed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_train.monitor.monitor import Monitor
from gputop_train.record.reader import read, replay_all
from gputop_train.record.recorder import Recorder
from gputop_train.record.replay import ReplayController
from gputop_train.record.summary import markdown, summarize
from gputop_train.views import view_of
from tests.support import shared_runs
from tests.support.clock import ManualClock
from tests.support.paths import REPO, SCENARIOS
from tests.support.sessions import JOB_PID, NOW, scripted_session
from tests.support.waiting import wait_until

# Monitors of real CPU jobs: on a loaded 2-core box some took over 120 s.
pytestmark = pytest.mark.timeout(300)

pytest.importorskip("torch")


def start_monitor(record: Path, *job: str) -> subprocess.Popen[str]:
    """The monitor's output goes to files: a job left running keeps inherited pipes open."""
    record.parent.mkdir(parents=True, exist_ok=True)
    out = (record.parent / "monitor.out").open("w")
    err = (record.parent / "monitor.err").open("w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop_train",
            "--headless",
            "--interval",
            "0.5",
            "--record",
            str(record),
            str(SCENARIOS),
            *job,
        ],
        stdout=out,
        stderr=err,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )


def wait_for_steps(record: Path, steps: int, timeout_s: float = 180.0) -> None:
    """``steps`` rows and the hook's hello recorded (a launched job's hook writes its rows
    itself, hook/row_log.py: they may be there before the monitor's own lines)."""

    def recorded() -> int:
        if not record.exists() or not job_pids(record):
            return 0
        lines = (line for line in record.open() if '"kind": "steps"' in line)
        return sum(len(json.loads(line).get("rows", [])) for line in lines)

    wait_until(lambda: recorded() >= steps, timeout_s, f"{steps} steps recorded", every_s=0.2)


def job_pids(record: Path) -> list[int]:
    return [json.loads(line)["pid"] for line in record.open() if '"kind": "hello"' in line]


def sessions() -> str:
    listed = subprocess.run(
        [sys.executable, "-m", "gputop_train", "sessions"], capture_output=True, text=True, cwd=REPO
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def recorded_run(factory: pytest.TempPathFactory) -> Path:
    """A finished recording of 40 steps of 50 ms, for the tests that only read it (one run;
    tests/support/shared_runs.py)."""

    def make(folder: Path) -> str:
        record = folder / "run.jsonl"
        start_monitor(record, "sleepy", "steps=40", "batch_ms=5", "step_ms=50").wait(timeout=60)
        return str(record)

    return Path(shared_runs.once(factory, "a recording of 40 steps of 50 ms", make)[0])


def running_now(listed: str) -> list[str]:
    """The lines under ``sessions``' "running now" heading."""
    if not listed.startswith("running now"):
        return []
    return listed.split("\n\n")[0].splitlines()[1:]


def test_a_monitor_killed_with_sigkill_still_yields_a_summary(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    monitor = start_monitor(record, "forever")
    try:
        wait_for_steps(record, 30)
        killed_at = time.time()
        os.kill(monitor.pid, signal.SIGKILL)
        monitor.wait(timeout=10)
        (job,) = job_pids(record)
        running = running_now(sessions())  # the job left behind, one attach away
        assert [line.split()[0] for line in running] == [str(job)], running
        assert "loops.py forever" in running[0]
    finally:
        for pid in job_pids(record):  # the job outlives the monitor by design
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while running_now(sessions()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running_now(sessions()) == []  # its socket file stays; a dead job is not listed
    recording = read(record)
    session = replay_all(recording)
    last_step_t = max(s.t for s in session.steps())
    assert killed_at - last_step_t < 1.5  # at most the last second (plus one batch) is lost
    summary = summarize(session, recording.meta)
    assert summary["figures"]["total_steps"] >= 30
    printed = subprocess.run(
        [sys.executable, "-m", "gputop_train", "summary", str(record)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert printed.returncode == 0 and "## Phases" in printed.stdout
    assert not (tmp_path / "run.summary.md").exists()  # printing writes nothing
    written = subprocess.run(
        [sys.executable, "-m", "gputop_train", "summary", "--write", str(record)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert written.returncode == 0 and f"wrote {tmp_path / 'run.summary.md'}" in written.stderr
    assert (tmp_path / "run.summary.md").exists() and (tmp_path / "run.svg").exists()
    assert (tmp_path / "run.summary.md").stat().st_mode & 0o777 == 0o600  # private


@pytest.mark.parametrize("signum", [signal.SIGHUP])
def test_sighup_writes_the_summary_and_leaves_the_job_running(tmp_path: Path, signum: int) -> None:
    """(SIGTERM stops a launched job: tests/test_stop_means_stop.py.)"""
    record = tmp_path / "run.jsonl"
    monitor = start_monitor(record, "forever")
    try:
        wait_for_steps(record, 20)
        monitor.send_signal(signum)
        monitor.wait(timeout=30)
        err = (tmp_path / "monitor.err").read_text()
        (pid,) = job_pids(record)
        os.kill(pid, 0)  # still alive: no exception
    finally:
        for pid in job_pids(record):
            os.kill(pid, signal.SIGKILL)
    assert "keeps running" in err
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    assert summary["figures"]["total_steps"] >= 20


def test_a_torn_last_line_and_a_corrupt_line_are_skipped_with_a_warning(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    record = tmp_path / "run.jsonl"
    lines = recorded_run(tmp_path_factory).read_text().splitlines()
    lines.insert(3, "{this is not json")
    record.write_text("\n".join(lines) + '\n{"kind": "steps", "t": 17')  # torn mid-write
    result = subprocess.run(
        [sys.executable, "-m", "gputop_train", "summary", str(record), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0
    assert "skipped 2 unreadable line(s)" in result.stderr and "line 4" in result.stderr
    assert json.loads(result.stdout)["figures"]["total_steps"] == 40


def test_something_that_is_not_a_recording_is_refused_clearly(tmp_path: Path) -> None:
    junk = tmp_path / "notes.jsonl"
    junk.write_text("hello\n")
    result = subprocess.run(
        [sys.executable, "-m", "gputop_train", "summary", str(junk)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2 and "no gputop-train header" in result.stderr


def test_replay_moves_a_cursor_through_the_recording(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    recording = read(recorded_run(tmp_path_factory))
    wall = [0.0]
    replay = ReplayController(recording, clock=lambda: wall[0])
    replay.playing = False
    step_times = sorted(s.t for s in replay_all(recording).steps())
    middle = step_times[20]  # 1 s in: by then a frame with the first steps was recorded
    replay.seek(middle)
    part = replay.session.snapshot().total_steps
    replay.seek(recording.ended_at)
    assert 0 < part < replay.session.snapshot().total_steps == 40
    replay.seek(middle)  # backwards: rebuilt, same state as before
    assert replay.session.snapshot().total_steps == part
    replay.playing, replay.speed_index = True, 2  # x4
    wall[0] += 1.0
    replay.snapshot(10.0, 60.0, 30)
    assert replay.cursor == pytest.approx(middle + 4.0)
    assert "# gputop-train session" in markdown(summarize(replay.session, recording.meta))


def test_sessions_lists_recordings_with_their_headline_figures(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    record = recorded_run(tmp_path_factory)
    listed = tmp_path / "data" / "gputop-train" / "sessions" / "2026-01-01T00-00-00-x.jsonl"
    listed.parent.mkdir(parents=True)
    shutil.copy(record, listed)
    shutil.copy(record.with_suffix(".summary.json"), listed.with_suffix(".summary.json"))
    line = next(line for line in sessions().splitlines() if "2026-01-01" in line)
    assert " 40 " in line and line.split()[4] == "0"  # 40 steps, exit code 0


def test_the_recording_holds_metadata_phases_and_findings_as_they_happened(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    monitor = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop_train",
            "--headless",
            "--record",
            str(record),
            "--schedule",
            "20:step_ms=2",
            str(SCENARIOS),
            "knobbed",
            # Long enough for a process sample (once a second) after the change at step 20;
            # the findings are a scripted session's (the next test), not this machine's speed.
            "steps=500",
            "batch_ms=3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    monitor.wait(timeout=120)
    kinds = [json.loads(line)["kind"] for line in record.open()]
    assert kinds[0] == "meta"
    for kind in (
        "gpus",
        "hello",
        "knobs",
        "steps",
        "procs",
        "knob_outcome",
        "phase",
        "job_ended",
    ):
        assert kind in kinds, kind
    hello = next(json.loads(line) for line in record.open() if '"kind": "hello"' in line)
    assert hello["frame"]["torch"]  # the job's torch version


def test_the_recording_holds_the_findings_when_the_headline_changes(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    recorder = Recorder(record, {"command": ["python", "demos/resnet.py"]}, clock=ManualClock(NOW))
    session = scripted_session(recorder=recorder)  # rung 4: workers busy, the GPU waits
    monitor = Monitor(session, JOB_PID, samplers=[])
    try:
        monitor._note_findings()  # what its findings thread does every period
        monitor._note_findings()  # the same headline: nothing new to record
    finally:
        monitor.client.close()
        recorder.close()
    lines = [json.loads(line) for line in record.open()]
    recorded = [line["findings"] for line in lines if line["kind"] == "findings"]
    shown = view_of(session.snapshot(monitor.window_s)).findings
    assert shown, "the scripted session has a finding"
    assert len(recorded) == 1 and recorded[0][0]["id"] == shown[0].id


def test_a_recording_with_fields_this_version_dropped_still_plays() -> None:
    # The H100 ladder was recorded when a process sample carried its thread count.
    path = REPO / "docs" / "examples" / "h100-ladder.jsonl"
    assert '"threads": ' in path.read_text()
    controller = ReplayController(read(path), clock=lambda: 0.0)
    controller.seek(controller.recording.started_at + 80.0)  # workers at rung 4
    processes = controller.session.snapshot().processes
    assert sum(p.role == "worker" for p in processes) >= 4
    assert not hasattr(processes[0], "threads")
