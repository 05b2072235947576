"""The dashboard on scripted data: key flows through Pilot, screens through SVG snapshots."""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.message import Message
from textual.widgets import Static, TabbedContent

from gputop_train import events
from gputop_train.collect.fake import FakeGpu, FakeNvml, FakeProcess, FakePsutil
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.collect.procs import ProcessSampler
from gputop_train.record.reader import read
from gputop_train.record.replay import ReplayController
from gputop_train.session.model import Session, Snapshot
from gputop_train.tui.app import GputopApp
from gputop_train.tui.knob_edit import KnobEditScreen
from gputop_train.tui.messages import SnapshotTaken
from gputop_train.tui.panels import text as panels
from gputop_train.tui.panels.knobs import KnobsPanel
from gputop_train.tui.panels.log import LogPanel
from gputop_train.tui.screens import HelpScreen, QuitScreen
from gputop_train.tui.widgets.live_text import LiveText
from tests.support.sessions import JOB_PID, NOW, scripted_recording, scripted_session
from tests.support.tui import AskedControls, app_under_test, tick


def make_app(with_gpu: bool = True, controls: AskedControls | None = None) -> GputopApp:
    return app_under_test(scripted_session(with_gpu).snapshot, controls=controls or AskedControls())


def text_of(app: GputopApp, selector: str) -> str:
    return app.query_one(selector, LiveText).text.plain


async def test_number_keys_switch_tabs() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        for key, tab in (("2", "processes"), ("3", "log"), ("4", "knobs"), ("1", "overview")):
            await pilot.press(key)
            assert app.query_one(TabbedContent).active == tab


async def test_pause_freezes_the_display_and_says_so() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("p")
        assert app.paused and "PAUSED" in text_of(app, "#header")
        before = app.last_snapshot
        app.refresh_data()
        assert app.last_snapshot is before  # nothing new is drawn while paused
        await pilot.press("p")
        assert not app.paused and "PAUSED" not in text_of(app, "#header")


async def test_once_a_second_panels_wait_for_every_second_tick() -> None:
    # At the default 2 Hz the steps panel follows every tick; the header, charts and
    # processes (data that changes once a second) are redrawn on every second tick only.
    session = scripted_session()
    asked_for_charts = []

    def source(
        window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot:
        asked_for_charts.append(chart_points > 0)
        return session.snapshot(window_s, chart_window_s, chart_points, with_phases)

    app = app_under_test(source)
    async with app.run_test(size=(80, 24)) as pilot:
        session.apply(events.JobEnded(0, ()))
        await tick(app, pilot)  # a fast tick
        assert "running" in text_of(app, "#header")
        await tick(app, pilot)  # the once-a-second one
        assert "exited 0" in text_of(app, "#header")
    assert asked_for_charts == [True, False, True]  # mount, fast tick, slow tick


async def test_a_burst_of_snapshots_draws_the_latest_with_the_slow_panels_it_skipped() -> None:
    # The UI thread was busy for three ticks: only the newest view is drawn, and the
    # once-a-second panels with it, since the slow tick among them was replaced.
    session = scripted_session()
    app = app_under_test(session.snapshot)
    drawn: list[int] = []

    def seen(message: Message) -> None:
        if isinstance(message, SnapshotTaken):
            drawn.append(message.tick)

    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        burst = [app.take_snapshot()]  # a fast tick
        session.apply(events.JobEnded(0, ()))
        burst += [app.take_snapshot(), app.take_snapshot()]  # the slow one, a fast one
        for message in burst:
            app.post_message(message)
        await pilot.pause()
        assert drawn == [3]
        assert "exited 0" in text_of(app, "#header")  # a slow panel, drawn from tick 3


async def test_w_cycles_the_chart_window() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        seen = [app.chart_window_s]
        for _ in range(3):
            await pilot.press("w")
            seen.append(app.chart_window_s)
        assert seen == [60.0, 300.0, 1800.0, 60.0]
        assert app.last_snapshot.charts.window_s == 60.0


async def test_help_opens_and_closes() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize(("key", "outcome"), [("s", "stop"), ("l", "leave")])
async def test_quit_asks_what_to_do_with_a_running_job(key: str, outcome: str) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press(key)
    assert app.return_value == outcome


async def test_quit_can_be_cancelled() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        await pilot.press("escape")
        assert not isinstance(app.screen, QuitScreen) and app.is_running


async def test_a_failed_job_keeps_the_app_open_with_its_exit_code_and_stderr() -> None:
    session = scripted_session()
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        session.apply(
            events.JobEnded(1, ("Traceback (most recent call last):", "ValueError: boom"))
        )
        app.refresh_data()
        await pilot.pause()
        assert "failed: exit 1" in text_of(app, "#header")
        await pilot.press("3")  # the log tab
        log_lines = list(app.query_one(LogPanel).lines)
        assert any("exit code 1" in line for line in log_lines)
        await pilot.press("q")  # the job is over: no question to ask
    assert app.return_value == "ended"


async def test_no_nvml_shows_na_and_the_reason_not_zero() -> None:
    app = make_app(with_gpu=False)
    async with app.run_test(size=(80, 24)):
        gpu = text_of(app, "#gpus")
        assert "N/A" in gpu and "no NVIDIA driver" in gpu
        assert "0%" not in gpu


def test_main_screen_80x24(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24))


def test_main_screen_160x48(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(160, 48))


def test_processes_tab_80x24(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["2"])


def test_no_gpu_80x24(snap_compare) -> None:
    assert snap_compare(make_app(with_gpu=False), terminal_size=(80, 24))


async def test_knobs_tab_flips_a_switch_and_edits_a_number_and_a_choice() -> None:
    controls = AskedControls()
    app = make_app(controls=controls)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")  # the knob list takes the focus
        await pilot.press("enter")  # num_workers: a number opens the editor
        assert isinstance(app.screen, KnobEditScreen)
        await pilot.press("1", "6", "enter")  # the current value starts selected: typing replaces
        await pilot.press("down", "enter")  # pin_memory: a switch flips in place
        await pilot.press("down", "enter")  # input: a choice opens the list
        await pilot.press("down", "enter")
    assert controls.asked == [("num_workers", "16"), ("pin_memory", False), ("input", "gpu-resize")]


async def test_the_phase_table_shows_each_configuration_and_its_speedup() -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        table = app.query_one("#phases LiveText", LiveText).text.plain
        assert "start" in table and "input=uint8" in table
        assert "1.00x" in table
        assert "phase 2" in text_of(app, "#header")


def test_knobs_tab_100x30(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 30), press=["4"])


def paused_replay(tmp_path: Path) -> ReplayController:
    recording = read(scripted_recording(tmp_path / "scripted.jsonl"))
    replay = ReplayController(recording, clock=lambda: 0.0)
    replay.playing = False
    replay.seek(recording.ended_at)
    return replay


def replay_app(tmp_path: Path) -> GputopApp:
    replay = paused_replay(tmp_path)
    return app_under_test(replay.snapshot, timeline=replay)


def test_replay_80x24(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(replay_app(tmp_path), terminal_size=(80, 24))


async def test_replay_keys_move_the_cursor(tmp_path: Path) -> None:
    replay = paused_replay(tmp_path)
    app = app_under_test(replay.snapshot, timeline=replay)
    async with app.run_test(size=(80, 24)) as pilot:
        end = replay.cursor
        await pilot.press("left")
        assert replay.cursor == pytest.approx(end - 10.0)
        await pilot.press("space", "plus")
        assert replay.playing and replay.speed == 2.0
        assert "REPLAY" in text_of(app, "#header")


def test_no_color_80x24(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    assert app.no_color  # monochrome: every figure is a number; only the charts split by colour
    assert snap_compare(app, terminal_size=(80, 24))


def test_ranks_and_gpus_of_a_torchrun_job_are_named() -> None:
    # Seen on two H200s (`gpu.sh ranks`, `git show 1ba2e44:benchmarks/gpu.sh`): one model name
    # for two GPUs, and two processes both called "main".
    session = Session(command=("torchrun", "--nproc-per-node", "2", "train.py"))
    launcher, rank0, rank1 = 700, 701, 702
    for pid, rank in ((rank1, 1), (rank0, 0)):
        session.apply(events.ProcessHello.of(pid, {"rank": rank, "argv": ["train.py"]}))
    gpus = [FakeGpu(name="NVIDIA H200"), FakeGpu(name="NVIDIA H200")]
    session.apply(events.GpusFound(tuple(NvmlSampler(FakeNvml(gpus)).open())))
    table = [FakeProcess(launcher, 1, "pt_elastic")]
    table += [FakeProcess(pid, launcher, "python") for pid in (rank1, rank0)]
    session.apply(
        events.ProcsSampled(
            ProcessSampler(launcher, session.hooked_pids, FakePsutil(table)).sample()
        )
    )
    snap = session.snapshot()
    assert "2× NVIDIA H200" in panels.header(snap, launcher, False).plain
    lines = panels.process_table(snap).plain.splitlines()[1:]
    assert [line.split()[:3] for line in lines] == [
        ["701", "rank", "0"],
        ["702", "rank", "1"],
        ["700", "launcher", "pt_elastic"],
    ]


async def test_a_finding_that_wraps_onto_more_lines_gets_the_room() -> None:
    # Seen on the H100: a longer action wrapped onto a second line and pushed the evidence
    # out of a panel sized for the previous text (same number of newlines, more rows).
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.paused = True  # no refresh replaces the texts under test
        findings = app.query_one("#findings", LiveText)
        findings.show(Text("▶ short\n  evidence"))
        await pilot.pause()
        before = findings.size.height
        findings.show(Text("▶ " + "a much longer action " * 6 + "\n  evidence"))
        await pilot.pause()
        assert findings.size.height > before


async def test_a_long_knob_name_never_runs_into_its_value() -> None:
    """Issue 39: "matmul_precisionhighest". Each knob's name and value stand apart, in
    columns as wide as the widest of the list."""
    session = scripted_session()
    knob = {"name": "float32_matmul_precision", "kind": "choice", "value": "highest"}
    choices = {"choices": ["highest", "high", "medium"], "help": "TF32 for float32 matmuls"}
    session.apply(events.KnobsDeclared(JOB_PID, ({**knob, **choices},)))
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        panel = app.query_one(KnobsPanel)
        options = [panel.get_option_at_index(i) for i in range(panel.option_count)]
    lines = [str(option.prompt) for option in options if not option.disabled]  # no headings
    assert any("float32_matmul_precision highest " in line for line in lines), lines
    columns = {line.index(" " + line.split()[1]) for line in lines}
    assert len(columns) == 1, lines  # every value starts in the same column


async def test_start_up_warnings_open_the_tui_whole() -> None:
    """Issue 39: a --prometheus port in use was said on stderr, under the TUI, and in the Log
    tab, cut; the TUI says it again when it opens, as a toast that wraps."""
    from gputop_train.tui.app import create_app
    from gputop_train.tui.boundary import AppOptions

    warning = (
        "cannot serve Prometheus metrics on 127.0.0.1:9455: Address already in use (another "
        "port: --prometheus PORT; 0 picks a free one); the job runs without the metrics endpoint"
    )
    options = AppOptions(job_pid=JOB_PID, auto_refresh=False, warnings=(warning,))
    app = create_app(scripted_session().snapshot, options)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = [(n.message, n.severity) for n in app._notifications]
    assert (warning, "warning") in shown  # whole: a toast wraps its text


async def test_workers_that_fit_the_process_panel_are_drawn_without_a_layout() -> None:
    # The table's box is as tall and wide as its panel (app.tcss): rows that fit it take that
    # room without laying the screen out again (a layout cost the whole screen a frame).
    session = scripted_session()
    every = session.snapshot().processes
    session.apply(events.ProcsSampled(every[:1]))  # the job alone, its workers not started
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one("#overview-procs LiveText", LiveText)
        await pilot.pause()
        box = table.size
        layouts: list[bool] = []
        original = table.refresh

        def spied(*regions: Any, **options: Any) -> Any:
            layouts.append(bool(options.get("layout")))
            return original(*regions, **options)

        table.refresh = spied  # type: ignore[method-assign]
        session.apply(events.ProcsSampled(every))  # the workers start
        app.refresh_data()
        await pilot.pause()
        assert len(every) > 2 and layouts and not any(layouts)
        assert table.size == box
        drawn = "\n".join(table.render_line(y).text for y in range(box.height))
        assert all(str(proc.pid) in drawn for proc in every)


async def test_a_height_only_resize_keeps_the_process_tables_rows_a_new_width_fits_anew() -> None:
    # The table keeps the most rows it has had: starting it afresh at a resize of its height
    # alone (the findings above grew a line) shrank it, then the next worker grew it again,
    # and each change of extent lays the whole screen out again. The rows it keeps are what it
    # asks of the layout (its box is at least as tall as its panel: app.tcss).
    session = scripted_session()
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(100, 40)) as pilot:
        table = app.query_one("#overview-procs LiveText", LiveText)
        await pilot.pause()

        def kept() -> int:
            return table.get_content_height(table.size, table.size, table.size.width)

        rows = kept()
        first = session.snapshot().processes[0]
        session.apply(events.ProcsSampled((first,)))  # the workers are gone
        app.refresh_data()
        await pilot.resize_terminal(100, 44)
        await pilot.pause()
        assert kept() == rows
        await pilot.resize_terminal(120, 44)
        await pilot.pause()
        assert kept() < rows  # a new width: the table is fitted afresh


async def test_s_saves_the_screenshot_named_after_its_session_and_private(tmp_path: Path) -> None:
    """Issue 46: the S key's SVG was "gputop-train_<time>.svg", mode 0644, where every other
    session file is the user's alone (0600) and named after the session."""
    from gputop_train.record.files import save_screenshot
    from gputop_train.tui.app import create_app
    from gputop_train.tui.boundary import AppOptions

    stem = tmp_path / "2026-12-05T10-00-00-resnet"
    options = AppOptions(
        job_pid=JOB_PID,
        auto_refresh=False,
        save_screenshot=lambda svg: save_screenshot(stem, svg, NOW),
    )
    app = create_app(scripted_session().snapshot, options)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("S")
        await pilot.press("S")  # a second one in the same second keeps the first
        await pilot.pause()
    saved = sorted(tmp_path.glob("*.svg"))
    clock = time.strftime("%H-%M-%S", time.localtime(NOW))
    assert [path.name for path in saved] == [
        f"{stem.name}.screenshot-{clock}-2.svg",
        f"{stem.name}.screenshot-{clock}.svg",
    ]
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in saved)
    assert "<svg" in saved[0].read_text()


async def test_s_without_session_files_says_so() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("S")
        await pilot.pause()
        assert any("no session files" in str(n.message) for n in app._notifications)


def _text_lines(static: Static) -> int:
    return len(str(static.render()).splitlines())


@pytest.mark.parametrize("columns", [80, 200])
async def test_the_help_and_the_quit_question_open_whole_at_80_and_200_columns(
    columns: int,
) -> None:
    """Issue 46: both wrapped at 200 columns (their boxes were capped at 76-78)."""
    app = make_app()
    async with app.run_test(size=(columns, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = app.screen.query_one("#help-text", Static)
        assert help_text.size.height == _text_lines(help_text)  # no line wrapped
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
        question = app.screen.query_one("#quit-text", Static)
        assert question.size.height == _text_lines(question)


async def test_a_knobs_long_help_wraps_in_its_own_column_at_80_columns() -> None:
    """Issue 46: at 80 columns a long help wrapped under the knob names."""
    session = scripted_session()
    knob = {"name": "prefetch_factor", "kind": "int", "value": 2, "minimum": 1, "maximum": 8}
    help_text = "batches each worker loads ahead of the step: " + "more hides a slow read " * 4
    session.apply(events.KnobsDeclared(JOB_PID, ({**knob, "help": help_text},)))
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.press("4")
        await tick(app, pilot, 2)  # the second draw knows the list's width
        panel = app.query_one(KnobsPanel)
        rows = [panel.render_line(y).text for y in range(panel.size.height)]
    first = next(y for y, row in enumerate(rows) if "prefetch_factor" in row)
    help_column = rows[first].index("batches")
    continued = rows[first + 1 : first + 4]
    assert all(row[:help_column].strip() == "" for row in continued), rows
    assert "more hides a slow read" in continued[0][help_column:]
