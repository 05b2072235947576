"""A recording that does not depend on the monitor being scheduled (issue 39).

A niced monitor on a busy machine lagged the job by 20-90 s, and a SIGKILL then lost that
much of its recording. The hook of a launched job appends the step rows it sends to the
session's recording itself (hook/row_log.py), from the job's process at the job's priority:
a monitor that is not run at all (SIGSTOP, the extreme of not being scheduled) and then
killed leaves a recording within a second of the job's own step count.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_train import events, wire
from gputop_train.headless import status_parts
from gputop_train.monitor.hook_client import HookClient, _Connection
from gputop_train.record import reader
from gputop_train.session.model import Session
from gputop_train.tui.panels import text as panels
from gputop_train.views import status_fields, view_of
from tests.support.hooked import hooked_child
from tests.support.paths import REPO, SCENARIOS

# What the hook has sent is on disk within this long of the job's step (the bar): the
# hook sends, and appends, every wire.SEND_PERIOD_S.
BEHIND_AT_MOST_S = 1.0


def test_the_hooks_line_is_the_recorders_line_of_step_rows() -> None:
    rows = [[1, 1700000000.5, 12.5, None, 4] + [None] * (len(wire.STEP_FIELDS) - 5)]
    line = wire.recorded_steps_line(42, 1700000001.25, [wire.encode_row(r) for r in rows])
    decoded = events.decode(json.loads(line))
    assert decoded == events.StepRows(42, tuple(rows))
    assert events.StepRows.kind == wire.RECORDED_STEPS


def _recorded_steps(path: Path, pid: int) -> list[int]:
    steps = []
    for line in reader.read(path).events:
        if line.get("kind") == wire.RECORDED_STEPS and line.get("pid") == pid:
            steps += [row[0] for row in line["rows"]]
    return steps


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_monitor_not_run_then_killed_leaves_the_jobs_steps_recorded(tmp_path: Path) -> None:
    stem = tmp_path / "run"
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", "--interval", "1",
         "--record", str(stem), "--", sys.executable, str(SCENARIOS), "knobbed",
         "steps=1000000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    job_pid = None
    try:
        job_pid = hooked_child(monitor.pid)
        session = Session()  # the job's own count, read by a client the test keeps running
        observer = HookClient(session, lambda: {job_pid})

        def newest() -> int:
            observer.poll(0.1)
            steps = session.steps()
            return steps[-1].step if steps else 0

        deadline = time.monotonic() + 180
        while newest() < 20:
            assert time.monotonic() < deadline, "the job never trained"
        monitor.send_signal(signal.SIGSTOP)  # never scheduled from here on
        stopped_at = newest()
        while newest() < stopped_at + 100:
            assert time.monotonic() < deadline, "the job stopped training"
        killed_at = time.time()
        monitor.kill()
        monitor.wait()
        while session.steps()[-1].t <= killed_at:
            newest()
        by_then = max(s.step for s in session.steps() if s.t <= killed_at - BEHIND_AT_MOST_S)
        recorded = _recorded_steps(stem.with_suffix(".jsonl"), job_pid)
        assert recorded and max(recorded) >= by_then
        assert len(recorded) == len(set(recorded)), "each row recorded once"
    finally:
        monitor.kill()
        if job_pid is not None:
            os.kill(job_pid, signal.SIGKILL)


def test_a_status_says_how_far_behind_the_job_the_monitor_reads_it() -> None:
    session = Session(command=("train.py",))
    client = HookClient(session, set)
    ours, theirs = socket.socketpair()
    connection = _Connection(4242, ours)
    try:
        rows = [[s, 1000.0 + s / 50] + [None] * (len(wire.STEP_FIELDS) - 2) for s in (1, 2, 3)]
        late = wire.Steps.encode_rows(4242, [wire.encode_row(r) for r in rows], time.time() - 8)
        for raw in wire.FrameDecoder().feed(late):
            client._dispatch(connection, raw)
        assert session.snapshot().readings["behind"] == {"pid": 4242, "s": 8.0, "steps": 400}
        assert "400 steps behind the job (8 s)" in status_parts(view_of(session.snapshot()))
        header = panels.header(session.snapshot(), 4242, paused=False).plain  # the TUI's too
        assert "│ 400 steps behind the job (8 s) │" in header
        assert status_fields(view_of(session.snapshot()))["behind"]["steps"] == 400
        rows = [[4, *rows[0][1:]]]
        prompt = wire.Steps.encode_rows(4242, [wire.encode_row(r) for r in rows], time.time())
        for raw in wire.FrameDecoder().feed(prompt):
            client._dispatch(connection, raw)
        assert not any("behind" in p for p in status_parts(view_of(session.snapshot())))
        assert "behind" not in panels.header(session.snapshot(), 4242, paused=False).plain
        assert status_fields(view_of(session.snapshot()))["behind"] is None
    finally:
        ours.close()
        theirs.close()
        client.close()


def test_the_pre_encoded_steps_frame_carries_when_it_was_sent() -> None:
    rows = [[1, 1.5, None, 2.25, 64, 1, None, None, None, None]]
    fast = wire.Steps.encode_rows(9, [wire.encode_row(row) for row in rows], 1700000000.25)
    assert fast == wire.Steps(9, rows, 1700000000.25).encode()


# The monitor as the CLI runs it, except that it connects to no hook: the extreme of a niced
# monitor that a busy machine schedules only after the job has ended (hook/agent.py waits
# WAIT_FOR_MONITOR_S for it, then exits). 15:19 UTC 2026-11-27, load 6-7 on the 2-core box: a
# 6-step demo exited 0 and its summary said total_steps 0.
NEVER_CONNECTS = (
    "import sys\n"
    "from gputop_train.monitor import hook_client\n"
    "hook_client.HookClient._discover = lambda self: None\n"
    "from gputop_train.cli import main\n"
    "sys.exit(main())\n"
)


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_monitor_that_never_reached_the_hook_still_sums_up_every_step(tmp_path: Path) -> None:
    stem = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-c", NEVER_CONNECTS, "--headless", "--format", "json",
         "--record", str(stem), "--", sys.executable, str(SCENARIOS), "knobbed", "steps=6"],
        capture_output=True, text=True, cwd=REPO, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["type"] == "summary" and summary["total_steps"] == 6
    assert summary["total_samples"] == 24  # the scenario's 4 samples a step
    recorded = sorted(_recorded_steps_any(stem.with_suffix(".jsonl")))
    assert recorded == list(range(1, 7)), "each row recorded once, by the hook"
    written = json.loads(stem.with_suffix(".summary.json").read_text())
    assert written["figures"]["total_steps"] == 6


def _recorded_steps_any(path: Path) -> list[int]:
    return [
        row[0]
        for line in reader.read(path).events
        if line.get("kind") == wire.RECORDED_STEPS
        for row in line["rows"]
    ]


def test_the_rows_read_back_are_those_past_the_steps_held(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    def line(pid: int, steps: range) -> bytes:
        rows = [[s, 1700000000.0 + s] + [None] * (len(wire.STEP_FIELDS) - 2) for s in steps]
        return wire.recorded_steps_line(pid, 1700000100.0, [wire.encode_row(r) for r in rows])

    header = json.dumps({"kind": "meta", "t": 1700000000.0, "format": 1}).encode() + b"\n"
    other = b'{"kind": "notice", "t": 1700000001.0, "text": "x"}\n'
    lines = [line(7, range(1, 4)), other, line(7, range(4, 7)), line(8, range(1, 3))]
    path.write_bytes(header + b"".join(lines) + line(7, range(7, 9)) + b'{"kind": "ste')
    read = [(item.pid, [row[0] for row in item.rows]) for item in reader.step_rows(path, {7: 5})]
    # 7's rows from the line holding step 6 on (5 is held, 6 is not), in order; 8's all; the
    # torn end skipped.
    assert sorted(read) == [(7, [4, 5, 6]), (7, [7, 8]), (8, [1, 2])]
    assert [steps for pid, steps in read if pid == 7] == [[4, 5, 6], [7, 8]]
    session = Session(started_at=1700000000.0)
    for item in reader.step_rows(path, session.steps_taken()):
        session.apply(item, record=False)
    assert session.steps_taken() == {7: 8, 8: 2}
