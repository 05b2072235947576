"""The dashboard app. ``create_app`` builds it from a snapshot source, the controls of a live
job or a replay's timeline, and its options (tui/boundary.py): tests hand it fakes.

A worker thread takes a snapshot and builds its view every --refresh period, off the UI
thread, and posts ``SnapshotTaken``; the app hands the latest view to each panel whose tier is
due and whose tab is shown (tui/panels/base.py), in one batched update. No sampling, NVML,
psutil or socket code runs here.
"""

from __future__ import annotations

import gc
import threading

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.driver import Driver
from textual.widgets import Footer, TabbedContent, TabPane

from .. import format as fmt
from ..front_end import JobControls, SnapshotSource
from ..session.model import Snapshot
from ..session.phases import KnobState
from ..views import View, view_of
from ..wire import KnobValue
from . import layout
from .boundary import AppOptions, Timeline
from .knob_edit import KnobEditScreen
from .messages import ApplyKnob, KnobAnswered, SnapshotTaken
from .panels.base import FAST, Panel, UiState
from .panels.knobs import KnobsPanel
from .panels.overview import HeaderPanel
from .quiet_input import quiet_input
from .renderer_guard import install_partial_updates, take_notice
from .screens import HelpScreen, QuitScreen

CHART_WINDOWS_S = (60.0, 300.0, 1800.0)
# One bucket per second at the 1-minute window: charts move once a second.
CHART_POINTS = 60
# Processes are sampled, chart buckets close and the header's clock moves once a second: the
# panels of that data (tier SLOW) are redrawn together in one frame a second.
SLOW_PANELS_S = 1.0
# A start-up warning stays up long enough to be read after the first screen has drawn.
STARTUP_WARNING_S = 30.0


class GputopApp(App[str]):
    """``run()`` returns what the user chose for the job: "stop", "leave" or "ended"."""

    CSS_PATH = "app.tcss"
    TITLE = "gputop-train"
    # htop, btop, nvitop habits: ? h F1 help, q quit, Ctrl+C quits too (through the same
    # question as q). The tabs' keys are in their titles; the footer keeps to 80 columns.
    BINDINGS = [
        Binding("question_mark,h,f1", "help", "help", id="app.help", key_display="?"),
        Binding("q", "quit_app", "quit", id="app.quit"),
        Binding("ctrl+c", "interrupt", "quit", show=False, id="app.interrupt", priority=True),
        Binding("p", "toggle_pause", "pause", id="app.pause"),
        Binding("w", "cycle_window", "window", id="app.window"),
        Binding(
            "1", "tab('overview')", "overview", show=False, id="app.tab.overview", priority=True
        ),
        Binding(
            "2", "tab('processes')", "processes", show=False, id="app.tab.processes", priority=True
        ),
        Binding("3", "tab('log')", "log", show=False, id="app.tab.log", priority=True),
        Binding("4", "tab('knobs')", "knobs", show=False, id="app.tab.knobs", priority=True),
        Binding("y", "scan_syncs", "syncs", id="app.scan_syncs"),
        Binding("a", "toggle_autopilot", "autopilot", id="app.autopilot"),
        Binding("D", "dump_stall", "stall dump", show=False, id="app.dump_stall"),
        Binding("space", "replay('toggle')", "play", id="replay.toggle", priority=True),
        Binding("left", "replay('back')", "-10s", id="replay.back", priority=True),
        Binding("right", "replay('forward')", "+10s", id="replay.forward", priority=True),
        Binding("plus", "replay('faster')", "faster", id="replay.faster", priority=True),
        Binding("minus", "replay('slower')", "slower", id="replay.slower", priority=True),
        Binding("home", "replay('start')", "start", show=False, id="replay.start", priority=True),
        Binding("end", "replay('end')", "end", show=False, id="replay.end", priority=True),
        Binding("S", "save_svg", "screenshot", show=False, id="app.screenshot"),
    ]
    LIVE_ONLY = ("scan_syncs", "toggle_autopilot", "dump_stall")

    def __init__(
        self,
        source: SnapshotSource,
        options: AppOptions,
        controls: JobControls | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        """Built through ``create_app``."""
        super().__init__()
        install_partial_updates()
        self._source = source
        self._options = options
        self._controls = controls
        self._timeline = timeline
        self._job_pid = options.job_pid
        self._chart_window_index = 0
        self._ticks = 0
        self._slow_every = max(1, round(SLOW_PANELS_S / options.refresh_s))
        self._active_tab = "overview"
        self._panels: list[Panel] = []
        self._drawn_tick = 0  # the refresh tick of the view drawn last
        self._stop_feed = threading.Event()
        self._reported_end = False
        self.paused = False
        self.last_view: View | None = None

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, its input thread asleep while the keyboard is (tui/quiet_input.py)."""
        return quiet_input(super().get_driver_class())

    @property
    def last_snapshot(self) -> Snapshot | None:
        return self.last_view.snap if self.last_view is not None else None

    def compose(self) -> ComposeResult:
        yield HeaderPanel(id="header")
        with TabbedContent(initial="overview"):
            for tab in layout.TABS:
                with TabPane(tab.title, id=tab.id):
                    yield from tab.widgets(self._options)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        for pane in self.query(TabPane):
            for widget in pane.query("*"):
                if isinstance(widget, Panel):
                    widget.tab = pane.id
        self._panels = [w for w in self.query("*") if isinstance(w, Panel)]
        self.refresh_data()
        for warning in self._options.warnings:
            self.notify(warning, severity="warning", timeout=STARTUP_WARNING_S, markup=False)
        if self._options.auto_refresh:
            # What is alive once the screen is built (Textual, the widgets, the modules) lives
            # as long as the app: out of the collector's sight, the collections the redraws'
            # garbage starts no longer walk it (most of the UI thread's collector time on the
            # fake 8-GPU node, docs/benchmarks.md §5). Tests leave it: their apps come and go.
            gc.freeze()
            self._feed()

    def on_unmount(self) -> None:
        self._stop_feed.set()

    @property
    def chart_window_s(self) -> float:
        return CHART_WINDOWS_S[self._chart_window_index]

    # -- views: taken off the UI thread, drawn on it ----------------------------------------

    @work(thread=True, exclusive=True, group="feed")
    def _feed(self) -> None:
        while not self._stop_feed.wait(self._options.refresh_s):
            if not self.paused:
                self.post_message(self.take_snapshot())

    def take_snapshot(self) -> SnapshotTaken:
        """One refresh period's view, as the worker takes it (any thread): post it to draw it.
        Every ``_slow_every``-th tick asks for the charts too."""
        self._ticks += 1
        return SnapshotTaken(self._take_view(self._is_slow(self._ticks)), self._ticks)

    def _is_slow(self, tick: int) -> bool:
        return tick % self._slow_every == 0

    def on_snapshot_taken(self, message: SnapshotTaken) -> None:
        """Draw the latest view; the once-a-second panels too when a slow tick came since
        the last one drawn (a newer view may have replaced it in the queue)."""
        if self.paused:
            return
        slow = message.tick // self._slow_every > self._drawn_tick // self._slow_every
        self._drawn_tick = message.tick
        self._apply(message.view, slow)

    def _visible(self, panel: Panel) -> bool:
        return panel.tab is None or panel.tab == self._active_tab

    def _take_view(self, slow: bool) -> View:
        """A snapshot of what the shown panels need, and its view (any thread)."""
        shown = [p for p in self._panels if self._visible(p)]
        charts = slow and any(p.NEEDS_CHARTS for p in shown)
        phases = any(p.NEEDS_PHASES for p in shown)
        points = CHART_POINTS if charts else 0
        return view_of(self._source(self._options.window_s, self.chart_window_s, points, phases))

    def _apply(self, view: View, slow: bool) -> None:
        self.last_view = view
        ui = self._ui_state()
        with self.batch_update():
            for panel in self._panels:
                if (panel.TIER == FAST or slow) and self._visible(panel):
                    key = panel.key(view, ui)
                    if key is None or key != panel.drawn_key:
                        panel.drawn_key = key
                        panel.show_view(view, ui)
        self._report_end(view.snap)
        self._report_renderer()

    def _ui_state(self) -> UiState:
        window = f"{self.chart_window_s / 60:g} min"
        return UiState(self._job_pid, self.paused, window, self._replay_status())

    def refresh_data(self, slow_panels: bool = True) -> None:
        """Take and draw a view now, on this thread (keys, tests)."""
        if not self.paused:
            self._apply(self._take_view(slow_panels), slow_panels)

    def _replay_status(self) -> str | None:
        replay = self._timeline
        if replay is None:
            return None
        at = replay.cursor - replay.recording.started_at
        total = replay.recording.ended_at - replay.recording.started_at
        state = "▶" if replay.playing else "‖"
        return f"REPLAY {state} {fmt.duration(at)}/{fmt.duration(total)} x{replay.speed:g}"

    def _report_renderer(self) -> None:
        """Say once that the terminal writer kept or fell back to Textual's own."""
        notice = take_notice()
        if notice is not None:
            self.notify(notice, severity="warning", timeout=15)

    def _report_end(self, snap: Snapshot) -> None:
        if snap.job.running or self._reported_end:
            return
        self._reported_end = True
        code = snap.job.exit_code
        if code == 0:
            self.notify("The job finished (exit 0). Press q to leave.", timeout=10)
        elif code is None:
            self.notify("The job ended (attached: its exit code is its parent's to read).")
        elif snap.job.stopped_by:  # a stop is not a failure (session/job_end.py)
            self.notify(f"The job was interrupted ({snap.job.stopped_by}): exit {code}.")
        else:
            tail = "\n".join(snap.job.stderr_tail[-5:])
            self.notify(f"The job failed: exit {code}\n{tail}", severity="error", timeout=30)

    # -- requests from the panels -------------------------------------------------------------

    def on_apply_knob(self, message: ApplyKnob) -> None:
        """Enter on a knob: flip a switch, or open the editor for a choice or a number."""
        knob = message.knob
        if knob.kind == "bool":
            self._request(knob, not knob.value)
            return

        def chosen(value: KnobValue | None) -> None:
            if value is not None:
                self._request(knob, value)

        self.push_screen(KnobEditScreen(knob), chosen)

    def _request(self, knob: KnobState, value: KnobValue) -> None:
        if self._controls is None:
            self.notify("knobs cannot be changed here (replay or no job)", severity="warning")
            return
        self.post_message(KnobAnswered(knob, value, self._controls.request_knob(knob.name, value)))

    def on_knob_answered(self, message: KnobAnswered) -> None:
        """The job's answer to a knob change: queued for the next step boundary, or why not."""
        if message.error:
            self.notify(message.error, severity="error")
        else:
            self.notify(f"{message.knob.name} → {message.value}: applies at the next step boundary")
        self.refresh_data()

    # -- actions --------------------------------------------------------------------------

    def action_replay(self, move: str) -> None:
        """The replay's time cursor: play/pause, seek, speed (keys do nothing live)."""
        replay = self._timeline
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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay's keys only in a replay (hidden live); a live job's only live."""
        if action == "replay":
            return self._timeline is not None
        if action in self.LIVE_ONLY:
            return self._timeline is None
        if action == "toggle_pause":  # a replay pauses with space
            return self._timeline is None
        return True

    def action_scan_syncs(self) -> None:
        """Count host-device syncs on the next step, with their file:line."""
        if self._controls is None:
            self.notify("no running job to scan", severity="warning")
            return
        self.notify(self._controls.scan_syncs())

    def action_dump_stall(self) -> None:
        """Write each rank's Python stacks and the collective it waits in (docs/ranks.md)."""
        if self._controls is None:
            self.notify("no running job to dump", severity="warning")
            return
        self.notify(self._controls.dump_stall())

    def action_toggle_autopilot(self) -> None:
        """Start the autopilot, or stop it keeping the settings in force."""
        if self._controls is None:
            self.notify("the autopilot needs a running job with knobs", severity="warning")
            return
        self.notify(self._controls.toggle_autopilot())
        self.refresh_data()

    def action_save_svg(self) -> None:
        """Save the screen as SVG beside the session's files, to share what you see."""
        save = self._options.save_screenshot
        if save is None:
            self.notify("no session files here to save a screenshot beside", severity="warning")
            return
        try:
            path = save(self.export_screenshot())
        except OSError as error:
            self.notify(f"screenshot not saved: {error}", severity="error", markup=False)
            return
        self.notify(f"screenshot saved: {path}", markup=False)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.last_view is not None:
            self.query_one(HeaderPanel).show_view(self.last_view, self._ui_state())

    def action_cycle_window(self) -> None:
        self._chart_window_index = (self._chart_window_index + 1) % len(CHART_WINDOWS_S)
        self.refresh_data()

    def action_tab(self, tab: str) -> None:
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()  # a dialog is open: the digit is typed into it instead
        # Drop the focus first: a focused widget left in the old pane would pull it back.
        self.set_focus(None)
        self.query_one(TabbedContent).active = tab
        self._active_tab = tab
        self.refresh_data()
        if tab == "knobs":
            self.query_one(KnobsPanel).focus()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._active_tab = event.pane.id or self._active_tab

    def action_quit_app(self) -> None:
        """q, Ctrl+C, Ctrl+Q and the palette's Quit: one question, stop or leave the job."""
        running = self.last_snapshot is None or self.last_snapshot.job.running
        if self._job_pid is None or not running:
            self.exit("ended")
            return
        if isinstance(self.screen, QuitScreen):
            return  # asked already: the dialog has the keys

        def decided(choice: str | None) -> None:
            if choice in ("stop", "leave"):
                self.exit(choice)

        self.push_screen(QuitScreen(self._job_pid, self._options.job_owned), decided)

    def action_interrupt(self) -> None:
        """Ctrl+C: the quit question; a second one, in the question, leaves the job running
        (a reflexive double Ctrl+C must not end hours of work)."""
        if isinstance(self.screen, QuitScreen):
            self.screen.dismiss("leave")
        else:
            self.action_quit_app()

    async def action_quit(self) -> None:
        """Textual's own quit (Ctrl+Q, the command palette): the same question."""
        self.action_quit_app()

    def action_help_quit(self) -> None:
        self.action_quit_app()


def create_app(
    source: SnapshotSource,
    options: AppOptions | None = None,
    controls: JobControls | None = None,
    timeline: Timeline | None = None,
) -> GputopApp:
    """The one way to build the app: a live job brings its controls, a replay its timeline
    (never both: a replay's knobs cannot be turned)."""
    if controls is not None and timeline is not None:
        raise ValueError("a live job's controls and a replay's timeline are exclusive")
    return GputopApp(source, options or AppOptions(), controls, timeline)
