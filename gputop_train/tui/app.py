"""The dashboard app. It takes its data sources in the constructor, so tests hand it fakes.

Every refresh tick asks the session for one immutable snapshot and applies it in one batched
update; no sampling, NVML, psutil or socket code runs here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rich.text import Text
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Footer, OptionList, RichLog, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from .. import format as fmt
from ..joblog import LogTail
from ..record.replay import ReplayController
from ..session.model import Snapshot
from .knob_edit import KnobEditScreen
from .screens import HelpScreen, QuitScreen
from .widgets import panels
from .widgets.chart import BrailleChart
from .widgets.live_text import LiveText

CHART_WINDOWS_S = (60.0, 300.0, 1800.0)
# One bucket per second at the 1-minute window: charts move once a second.
CHART_POINTS = 60
# 2 Hz is the default: fresh enough to watch a step-time change, cheap over SSH.
DEFAULT_REFRESH_S = 0.5
# Processes are sampled, chart buckets close and the header's clock moves once a second: the
# panels of that data are redrawn together in one frame a second, not in whichever tick each
# happens to change in (every frame costs the compositor a pass over the screen).
SLOW_PANELS_S = 1.0


class SnapshotSource(Protocol):
    def __call__(
        self, window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot: ...


class GputopApp(App[str]):
    """``run()`` returns what the user chose for the job: "stop", "leave" or "ended"."""

    CSS_PATH = "app.tcss"
    TITLE = "gputop-train"
    BINDINGS = [
        Binding("question_mark", "help", "help", id="app.help"),
        Binding("q", "quit_app", "quit", id="app.quit"),
        Binding("p", "toggle_pause", "pause", id="app.pause"),
        Binding("w", "cycle_window", "chart window", id="app.window"),
        Binding("1", "tab('overview')", "overview", id="app.tab.overview", priority=True),
        Binding("2", "tab('processes')", "processes", id="app.tab.processes", priority=True),
        Binding("3", "tab('log')", "log", id="app.tab.log", priority=True),
        Binding("4", "tab('knobs')", "knobs", id="app.tab.knobs", priority=True),
        Binding("y", "scan_syncs", "scan syncs", id="app.scan_syncs"),
        Binding(
            "space", "replay('toggle')", "play/pause", show=False, id="replay.toggle", priority=True
        ),
        Binding("left", "replay('back')", "-10 s", show=False, id="replay.back", priority=True),
        Binding(
            "right", "replay('forward')", "+10 s", show=False, id="replay.forward", priority=True
        ),
        Binding(
            "plus", "replay('faster')", "faster", show=False, id="replay.faster", priority=True
        ),
        Binding(
            "minus", "replay('slower')", "slower", show=False, id="replay.slower", priority=True
        ),
        Binding("home", "replay('start')", "start", show=False, id="replay.start", priority=True),
        Binding("end", "replay('end')", "end", show=False, id="replay.end", priority=True),
        Binding("S", "save_svg", "screenshot", show=False, id="app.screenshot"),
    ]

    def __init__(
        self,
        source: SnapshotSource,
        job_pid: int | None = None,
        log: LogTail | None = None,
        refresh_s: float = DEFAULT_REFRESH_S,
        window_s: float = 10.0,
        auto_refresh: bool = True,
        screenshot_dir: str | None = None,
        request_knob: Callable[[str, Any], str | None] | None = None,
        scan_syncs: Callable[[], None] | None = None,
        replay: ReplayController | None = None,
    ) -> None:
        super().__init__()
        self._source = source
        self._job_pid = job_pid
        self._shown_notices: tuple[str, ...] = ()
        self._log = log
        self._refresh_s = refresh_s
        self._window_s = window_s
        self._auto_refresh = auto_refresh
        self._screenshot_dir = screenshot_dir
        self._request_knob = request_knob
        self._scan_syncs = scan_syncs
        self._replay = replay
        self._knob_names: tuple[str, ...] | None = None
        self._knob_prompts: dict[str, Text] = {}
        self._chart_window_index = 0
        self._ticks = 0
        self._slow_every = max(1, round(SLOW_PANELS_S / refresh_s))
        self.paused = False
        self._reported_end = False
        self.last_snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield LiveText(id="header")
        with TabbedContent(initial="overview"):
            with TabPane("1 Overview", id="overview"):
                with Horizontal(id="top"):
                    yield LiveText(id="steps")
                    yield LiveText(id="gpus")
                yield LiveText(id="findings")
                with Grid(id="charts"):
                    yield BrailleChart("samples/s", "cyan", id="chart-throughput")
                    yield BrailleChart("step ms", "blue", under_color="red", id="chart-step")
                    yield BrailleChart("GPU %", "green", under_color="magenta", id="chart-util")
                    yield BrailleChart("GPU mem", "yellow", id="chart-mem")
                with VerticalScroll(id="overview-procs"):
                    yield LiveText(id="overview-procs-text")
            with TabPane("2 Processes", id="processes"), VerticalScroll(id="procs"):
                yield LiveText(id="procs-text")
            with TabPane("3 Log", id="log"):
                yield RichLog(id="joblog", max_lines=2000, wrap=False, markup=False)
            with TabPane("4 Knobs", id="knobs"):
                yield Static(
                    "Knobs: ↑↓ choose, enter to change (switches flip); changes apply at the "
                    "next step boundary and open a new phase",
                    id="knobs-help",
                )
                yield OptionList(id="knob-list")
                with VerticalScroll(id="phases"):
                    yield LiveText(id="phases-text")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_data()
        if self._auto_refresh:
            self.set_interval(self._refresh_s, self._tick)

    @property
    def chart_window_s(self) -> float:
        return CHART_WINDOWS_S[self._chart_window_index]

    def _tick(self) -> None:
        self._ticks += 1
        self.refresh_data(slow_panels=self._ticks % self._slow_every == 0)

    def refresh_data(self, slow_panels: bool = True) -> None:
        """One tick: a snapshot from the session, applied in one batched update. The panels of
        once-a-second data (header, findings, charts, processes) only with ``slow_panels``."""
        if self.paused:
            return
        knobs_shown = self.query_one(TabbedContent).active == "knobs"
        chart_points = CHART_POINTS if slow_panels else 0
        snap = self._source(self._window_s, self.chart_window_s, chart_points, knobs_shown)
        self.last_snapshot = snap
        with self.batch_update():
            self._show("#steps", panels.steps_panel(snap))
            self._show("#gpus", panels.gpu_panel(snap))
            self._apply_knobs(snap)
            self._apply_log(snap)
            if slow_panels:
                self._apply_slow(snap)

    def _apply_slow(self, snap: Snapshot) -> None:
        pid = self._job_pid
        window = f"{self.chart_window_s / 60:g} min"
        self._show("#header", panels.header(snap, pid, self.paused, window, self._replay_status()))
        self._show("#findings", panels.findings_panel(snap))
        self._apply_charts(snap)
        active = self.query_one(TabbedContent).active
        if active in ("overview", "processes"):
            table_id = "#overview-procs-text" if active == "overview" else "#procs-text"
            self._show(table_id, panels.process_table(snap))

    def _replay_status(self) -> str | None:
        replay = self._replay
        if replay is None:
            return None
        at = replay.cursor - replay.recording.started_at
        total = replay.recording.ended_at - replay.recording.started_at
        state = "playing" if replay.playing else "paused"
        return (
            f"REPLAY {state} {fmt.duration(at)}/{fmt.duration(total)} x{replay.speed:g}"
            " (space, ←/→, +/-)"
        )

    def _apply_knobs(self, snap: Snapshot) -> None:
        if snap.phases:  # computed only while the Knobs tab shows them
            self._show("#phases-text", panels.phase_table(snap))
        knob_list = self.query_one("#knob-list", OptionList)
        names = tuple(k.name for k in snap.knobs)
        prompts = {k.name: panels.knob_prompt(k, snap) for k in snap.knobs}
        if names != self._knob_names:
            self._knob_names = names
            highlighted = knob_list.highlighted
            knob_list.clear_options()
            if names:
                knob_list.add_options(Option(prompts[n], id=n) for n in names)
                knob_list.highlighted = min(highlighted or 0, len(names) - 1)
            else:
                knob_list.add_option(
                    Option(Text("this script declares no knobs (see docs/knobs.md)", "dim"))
                )
        else:
            for name, prompt in prompts.items():
                if self._knob_prompts.get(name) != prompt:
                    knob_list.replace_option_prompt(name, prompt)
        self._knob_prompts = prompts

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a knob: flip a switch, or open the editor for a choice or number."""
        if event.option_list.id != "knob-list" or self.last_snapshot is None:
            return
        knob = next((k for k in self.last_snapshot.knobs if k.name == event.option.id), None)
        if knob is None:
            return
        if knob.kind == "bool":
            self._request(knob.name, not knob.value)
            return

        def chosen(value: Any) -> None:
            if value is not None:
                self._request(knob.name, value)

        self.push_screen(KnobEditScreen(knob), chosen)

    def _request(self, name: str, value: Any) -> None:
        if self._request_knob is None:
            self.notify("knobs cannot be changed here (replay or no job)", severity="warning")
            return
        error = self._request_knob(name, value)
        if error:
            self.notify(error, severity="error")
        else:
            self.notify(f"{name} → {value}: applies at the next step boundary")
        self.refresh_data()

    def _show(self, selector: str, text: Text) -> None:
        self.query_one(selector, LiveText).show(text)

    def _apply_charts(self, snap: Snapshot) -> None:
        charts = snap.charts
        if charts is None or self.query_one(TabbedContent).active != "overview":
            return  # hidden charts are not redrawn
        throughput = [v for v in charts.samples_per_s if v is not None]
        steps = sorted(v for v in charts.step_ms if v is not None)
        # The 95th percentile sets the scale: one start-up or compile step must not flatten it.
        step_top = steps[int(0.95 * (len(steps) - 1))] * 1.3 if steps else 1.0
        total_mem = sum(g.mem_total_bytes or 0 for g in snap.latest_gpus) or None
        self.query_one("#chart-throughput", BrailleChart).update_series(
            charts.samples_per_s, max(throughput, default=1.0) * 1.2, "hook"
        )
        self.query_one("#chart-step", BrailleChart).update_series(
            charts.step_ms,
            step_top,
            "hook, red=data-wait",
            under=charts.data_wait_ms,
        )
        self.query_one("#chart-util", BrailleChart).update_series(
            charts.gpu_util_pct,
            100.0,
            "NVML, magenta=tensor",
            under=charts.tensor_active_pct,
        )
        self.query_one("#chart-mem", BrailleChart).update_series(
            charts.gpu_mem_used_bytes,
            float(total_mem or max((v or 0 for v in charts.gpu_mem_used_bytes), default=1) or 1),
            "NVML" if total_mem else "NVML: N/A",
        )

    def _apply_log(self, snap: Snapshot) -> None:
        log = self.query_one("#joblog", RichLog)
        if self._log is not None:
            for line in self._log.read_new():
                log.write(line)
        for notice in snap.notices[len(self._shown_notices) :]:
            log.write(f"[gputop-train] {notice}")
        self._shown_notices = snap.notices
        if not snap.job.running and not self._reported_end:
            self._reported_end = True
            code = snap.job.exit_code
            if code == 0:
                self.notify("The job finished (exit 0). Press q to leave.", timeout=10)
            elif code is None:
                self.notify("The job ended (attached: its exit code is its parent's to read).")
            else:
                tail = "\n".join(snap.job.stderr_tail[-5:])
                self.notify(f"The job failed: exit {code}\n{tail}", severity="error", timeout=30)
                log.write(f"[gputop-train] the job failed with exit code {code}")

    # -- actions --------------------------------------------------------------------------

    def action_replay(self, move: str) -> None:
        """The replay's time cursor: play/pause, seek, speed (keys do nothing live)."""
        replay = self._replay
        if replay is None or self.screen is not self.screen_stack[0]:
            raise SkipAction()  # live, or a dialog is open: the key is theirs
        recording = replay.recording
        moves = {
            "toggle": replay.toggle,
            "back": lambda: replay.seek(replay.cursor - 10.0),
            "forward": lambda: replay.seek(replay.cursor + 10.0),
            "faster": lambda: replay.faster(1),
            "slower": lambda: replay.faster(-1),
            "start": lambda: replay.seek(recording.started_at),
            "end": lambda: replay.seek(recording.ended_at),
        }
        moves[move]()
        self.refresh_data()

    def action_scan_syncs(self) -> None:
        """Count host-device syncs on the next step, with their file:line."""
        if self._scan_syncs is None:
            self.notify("no running job to scan", severity="warning")
            return
        self._scan_syncs()
        self.notify("sync scan requested: the next step is scanned (CUDA jobs only)")

    def action_save_svg(self) -> None:
        """Save the screen as SVG (next to the job's log), to share what you see."""
        path = self.save_screenshot(path=self._screenshot_dir)
        self.notify(f"screenshot saved: {path}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.last_snapshot is not None:
            window = f"{self.chart_window_s / 60:g} min"
            pid = self._job_pid
            header = panels.header(
                self.last_snapshot, pid, self.paused, window, self._replay_status()
            )
            self._show("#header", header)

    def action_cycle_window(self) -> None:
        self._chart_window_index = (self._chart_window_index + 1) % len(CHART_WINDOWS_S)
        self.refresh_data()

    def action_tab(self, tab: str) -> None:
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()  # a dialog is open: the digit is typed into it instead
        # Drop the focus first: a focused widget left in the old pane would pull it back.
        self.set_focus(None)
        self.query_one(TabbedContent).active = tab
        self.refresh_data()
        if tab == "knobs":
            self.query_one("#knob-list", OptionList).focus()

    def action_quit_app(self) -> None:
        running = self.last_snapshot is None or self.last_snapshot.job.running
        if self._job_pid is None or not running:
            self.exit("ended")
            return

        def decided(choice: str | None) -> None:
            if choice in ("stop", "leave"):
                self.exit(choice)

        self.push_screen(QuitScreen(self._job_pid), decided)
