"""What a new user meets in the first hour (issue: first hour): each point as a test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_train import events, wire
from gputop_train.collect import stacks
from gputop_train.collect.fake import FakeProcess, FakePsutil
from gputop_train.collect.procs import ProcessSampler
from gputop_train.collect.stacks import StackSampler
from gputop_train.monitor.monitor import Monitor
from gputop_train.record.reader import read, replay_all
from gputop_train.session.model import Session
from gputop_train.tui.panels import text as panels
from gputop_train.tui.panels.log import LogPanel
from gputop_train.tui.panels.overview import ChartsPanel
from gputop_train.tui.screens import HelpScreen, QuitScreen
from gputop_train.tui.widgets.chart import BrailleChart
from gputop_train.tui.widgets.live_text import LiveText
from gputop_train.views import activity_note, status_fields, view_of
from tests.support.paths import REPO, SCENARIOS
from tests.support.sessions import JOB_PID, scripted_session
from tests.support.tui import app_under_test
from tests.support.waiting import wait_until

GPUTOP = [sys.executable, "-m", "gputop_train"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().find("zombie") < 0


# 1. A closed pipe ends the pipeline: no traceback, the job stopped, the files written.


@pytest.mark.torch
def test_a_headless_reader_that_goes_away_stops_the_job_and_keeps_the_summary(
    tmp_path: Path,
) -> None:
    record = tmp_path / "piped.jsonl"
    options = ["--headless", "--format", "json", "--interval", "0.3", "--record", str(record)]
    monitor = subprocess.Popen(
        [*GPUTOP, *options, str(SCENARIOS), "forever"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert monitor.stdout is not None
    while not json.loads(monitor.stdout.readline())["total_steps"]:
        pass  # until it trains, then what `| head -3` reads
    for _ in range(3):
        json.loads(monitor.stdout.readline())
    monitor.stdout.close()
    _, err = monitor.communicate(timeout=90)
    assert "BrokenPipe" not in err and "gputop_train/" not in err  # no traceback of ours
    job_pid = int(re.search(r"scenario forever pid (\d+)", err).group(1))
    assert not alive(job_pid)  # stopped, not orphaned under PID 1
    assert f"wrote {record}" in err  # the recording first: replay and summary take it
    assert Path(f"{tmp_path / 'piped'}.summary.json").exists()
    assert replay_all(read(record)).snapshot().job.stopped_by == "the output pipe was closed"


def test_sessions_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    result = subprocess.run(
        f"{sys.executable} -m gputop_train sessions | head -c 0",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert "Traceback" not in result.stderr


# 2. Every exit goes through the same question.


@pytest.mark.parametrize("key", ["ctrl+c", "ctrl+q", "q"])
async def test_every_way_to_quit_asks_what_to_do_with_the_job(key: str) -> None:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(key)
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("ctrl+c")  # a reflexive second Ctrl+C leaves the job running
    assert app.return_value == "leave"


async def test_the_command_palettes_quit_asks_too() -> None:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.action_quit()  # what the palette's "Quit the application" runs
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen) and app.is_running


# 3. A finished or failed run keeps its final state on screen.


async def test_a_failed_run_keeps_its_figures_its_outcome_and_its_error() -> None:
    session = scripted_session()
    clock = session.clock
    session.apply(events.JobEnded(1, ("Traceback (most recent call last):", "ValueError: boom")))
    session.apply(events.ProcsSampled(()))  # the job's tree is gone
    clock.now += 60.0  # type: ignore[attr-defined]
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(100, 30)):
        steps = app.query_one("#steps", LiveText).text.plain
        findings = app.query_one("#findings", LiveText).text.plain
        procs = app.query_one("#overview-procs LiveText", LiveText).text.plain
    assert re.search(r"samples/s\s+3\d{3}", steps)  # the last window of training, not N/A
    assert "failed: exit 1" in findings and "ValueError: boom" in findings
    assert "steps in" in findings  # the whole run's figures
    assert "Input-bound" in findings  # and the final finding
    assert "ended" in procs and "no processes sampled yet" not in procs


# 4. At 80x24 nothing runs together and what matters stays.


def test_process_columns_never_run_together_at_any_width() -> None:
    snap = scripted_session().snapshot()
    for width in (40, 60, 80, 160):
        lines = panels.process_table(snap, width).plain.splitlines()
        assert all(len(line) <= width for line in lines)
        assert not re.search(r"[kMG]B/s\S", "\n".join(lines))  # "139.2 kB/s28.6 kB/s" was seen


async def test_the_phase_table_keeps_speedup_and_gpu_columns_at_80_columns() -> None:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        table = app.query_one("#phases LiveText", LiveText).text.plain
    header = table.splitlines()[1]
    for column in ("samples/s", "speed-up", "GPU util", "tensor", "peak mem"):
        assert column in header
    assert all(len(line) <= 78 for line in table.splitlines())


async def test_w_shows_its_new_window_in_the_chart_titles_at_80_columns() -> None:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("w")
        chart = app.query_one("#chart-throughput", BrailleChart)
        title = chart.render_line(0).text
    assert "5 min" in title and "· axis " in title  # its window, its latest value and its axis


# 5. The screen says what is happening when nothing is measured yet.


def test_a_hooked_loop_without_optimizer_steps_says_so() -> None:
    session = Session(command=("train.py",))
    session.apply(events.ProcessHello.of(7, {"rank": None}))
    note = activity_note(session.snapshot().activity)
    assert note is not None and "no optimizer.step()" in note


def test_a_job_that_fails_before_training_says_so_not_was_torch_imported() -> None:
    session = Session(command=("train.py",))
    session.apply(events.JobEnded(1, ('  File "train.py", line 3', "SyntaxError: invalid syntax")))
    from gputop_train.headless import summary_text

    text = summary_text(view_of(session.snapshot(with_phases=True)))
    assert "failed (exit 1) before any training step" in text and "SyntaxError" in text
    assert "was torch imported" not in text


def test_a_job_sampled_by_py_spy_says_when_its_first_window_comes() -> None:
    session = Session(command=("train.py",))
    session.apply(events.StacksExpected(10.0))
    note = view_of(session.snapshot()).snap.activity_note  # as the front ends read it
    assert note is not None and "py-spy: the first window comes in 10 s" in note


@pytest.mark.torch
def test_headless_explains_while_it_waits_not_only_at_exit(tmp_path: Path) -> None:
    # The job waits (without training) until the monitor has explained the wait: a job of a
    # fixed three seconds ended before a niced monitor on a loaded box printed any status.
    printed = tmp_path / "printed"
    code = f"import os, time, torch\nwhile not os.path.exists({str(printed)!r}): time.sleep(0.1)\n"
    options = ["--headless", "--interval", "0.5", "--no-record"]
    monitor = subprocess.Popen(
        [*GPUTOP, *options, "--", sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert monitor.stdout is not None
    waiting = "waiting for the first training step"
    try:
        before = []  # the monitor's lines until it says why nothing trains yet
        for line in monitor.stdout:
            before.append(line)
            if waiting in line:
                break
        printed.touch()
        rest, _ = monitor.communicate(timeout=120)
    finally:
        printed.touch()
        if monitor.poll() is None:
            monitor.kill()
    assert before and waiting in before[-1], "".join(before)
    # From the first status that explains, every status explains, until the exit summary.
    output = "".join(before) + rest
    statuses = [s for s in output.split("\ngputop-train:")[0].split("\n[") if s.strip()]
    explained = next(i for i, status in enumerate(statuses) if waiting in status)
    assert all(waiting in status for status in statuses[explained:])


# 6. The recording's path is printed; 9. --no-record leaves no log behind.


@pytest.mark.torch
def test_the_recording_is_named_and_no_record_leaves_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    # What is recorded and logged is the monitor's doing, whatever the job imports (a torch
    # job cost 4.3 s of CPU to start, twice, for nothing this test reads).
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    job = [str(script)]
    recorded = subprocess.run(
        [*GPUTOP, "--headless", *job], capture_output=True, text=True, cwd=REPO, env=env
    )
    written = re.findall(r"wrote (\S+)", recorded.stderr)
    assert written[0].endswith(".jsonl") and any(w.endswith(".log") for w in written)
    sessions = tmp_path / "data" / "gputop-train" / "sessions"
    before = set(sessions.iterdir())
    unrecorded = subprocess.run(
        [*GPUTOP, "--headless", "--no-record", *job], capture_output=True, text=True, cwd=REPO,
        env=env,
    )  # fmt: skip
    assert unrecorded.returncode == 0 and "wrote" not in unrecorded.stderr
    assert set(sessions.iterdir()) == before  # no .log either


# 8. The Log tab can be scrolled back while the job prints; attached, it says where.


async def test_the_log_stays_where_the_user_scrolled_while_the_job_prints(tmp_path: Path) -> None:
    from gputop_train.job.log import LogTail

    log = tmp_path / "job.log"
    log.write_text("".join(f"line {n}\n" for n in range(200)))
    session = scripted_session()
    app = app_under_test(session.snapshot, log=LogTail(log))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        richlog = app.query_one(LogPanel)
        richlog.scroll_home(animate=False)
        await pilot.pause()
        with log.open("a") as handle:
            handle.write("".join(f"more {n}\n" for n in range(50)))
        app.refresh_data()
        await pilot.pause()
        assert richlog.scroll_y == 0  # not pulled back to the tail
        richlog.scroll_end(animate=False)
        await pilot.pause()
        with log.open("a") as handle:
            handle.write("last\n")
        app.refresh_data()
        await pilot.pause()
        assert richlog.is_vertical_scroll_end  # at the tail, it follows


# 9. The smaller ones.


def test_a_run_stopped_on_purpose_replays_as_stopped_not_failed(tmp_path: Path) -> None:
    from gputop_train.record.recorder import Recorder

    session = Session(command=("train.py",))
    recorder = Recorder(tmp_path / "r.jsonl", {"command": ["train.py"]})
    session.listener = recorder.record_event
    session.apply(events.StopAsked("stopped from the monitor"))
    session.apply(events.JobEnded(130))
    recorder.close()
    snap = replay_all(read(tmp_path / "r.jsonl")).snapshot()
    assert not snap.job.failed and "stopped (exit 130)" in panels.header(snap, 1, False).plain


def test_a_small_models_tflops_keep_their_digits_in_json() -> None:
    from dataclasses import replace

    session = scripted_session()
    view = view_of(session.snapshot())
    view = replace(view, achieved_tflops=0.00412)
    assert status_fields(view)["achieved_tflops"] == 0.00412


def test_a_tiny_models_tflops_read_as_under_a_gflops_on_screen() -> None:
    from gputop_train.views import _tflops_text

    assert [_tflops_text(v) for v in (9.66e-09, 0.00412, 312.4, None)] == [
        "<0.001", "0.00412", "312", "N/A",
    ]  # fmt: skip


def test_a_sync_scan_says_when_there_is_nothing_to_scan() -> None:
    session = Session(command=("train.py",))
    monitor = Monitor(session, 1, samplers=[])
    assert "need the hook" in monitor.scan_syncs()
    session.apply(events.ProcessHello.of(7, {"rank": None}))
    session.apply(events.FactSeen.of(7, {"type": "model", "cuda": False}))
    assert "on the CPU" in monitor.scan_syncs()


def test_py_spy_refused_to_root_names_the_missing_capability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(stacks, "may_trace_others", lambda: False)  # the capability withheld
    explained = StackSampler(1, executable="/bin/true")._explain("Operation not permitted")
    assert "even as root" in explained and "SYS_PTRACE" in explained and "sudo" not in explained


@pytest.mark.torch
def test_a_sigtermed_job_leaves_no_socket_behind(tmp_path: Path) -> None:
    monitor = subprocess.Popen(
        [*GPUTOP, "--headless", "--no-record", str(SCENARIOS), "forever"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert monitor.stderr is not None
    line = ""
    while "scenario forever pid" not in line:
        line = monitor.stderr.readline()
    job_pid = int(line.split()[-1])
    socket = wire.socket_path(job_pid, wire.runtime_dir())
    wait_until(socket.exists, 60, what="the job's hook socket")
    os.kill(job_pid, signal.SIGTERM)  # the hook's atexit never runs
    monitor.communicate(timeout=60)
    assert not socket.exists()


async def test_h_and_f1_open_the_help() -> None:
    for key in ("h", "f1", "question_mark"):
        app = app_under_test(scripted_session().snapshot)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(key)
            assert isinstance(app.screen, HelpScreen)


def test_dash_capital_v_prints_the_version() -> None:
    result = subprocess.run([*GPUTOP, "-V"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0 and result.stdout.startswith("gputop-train ")


async def test_each_chart_shows_its_latest_value_and_scale() -> None:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=(80, 24)):
        charts = app.query_one(ChartsPanel).query(BrailleChart)
        labels = [chart.label for chart in charts]
    assert labels[0][:2] == ("3,507", "4,252") and labels[2][:2] == ("74", "100")


def test_summary_of_a_missing_file_says_what_to_do() -> None:
    result = subprocess.run(
        [*GPUTOP, "summary", "/nonexistent.jsonl"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 2 and "Errno" not in result.stderr
    assert "no recording at /nonexistent.jsonl (gputop-train sessions lists them)" in result.stderr


def test_the_process_table_shows_an_ended_tree_as_ended() -> None:
    session = Session(command=("train.py",))
    table = FakePsutil([FakeProcess(JOB_PID, 1, "python3", cpu=50.0)])
    sampler = ProcessSampler(JOB_PID, session.hooked_pids, table)
    session.apply(events.ProcsSampled(sampler.sample()))
    table.processes.clear()
    session.apply(events.ProcsSampled(sampler.sample()))
    assert [p.status for p in session.snapshot().processes] == ["ended"]
