"""Modal screens: help and the quit question."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

# Every line of the help and the quit question fits 72 columns: their boxes (border and
# padding: 6 more) open whole at 80 columns and never wrap on a wider screen (issue 46).
TEXT_COLUMNS = 72

HELP = """\
[b]gputop-train keys[/b]

  [b]? h F1[/b]  this help              [b]q[/b] [b]Ctrl+C[/b]  quit (asks about the job)
  [b]p[/b]       pause / resume display  [b]w[/b]   chart window 1 / 5 / 30 min
  [b]1[/b]-[b]4[/b]     Overview, Processes, Log, Knobs
  [b]tab[/b]     move focus              [b]↑ ↓[/b] scroll tables and the log
  [b]y[/b]       scan the next step for host-device syncs (file:line of each)
  [b]a[/b]       start / stop the autopilot (Knobs tab; docs/autopilot.md)
  [b]D[/b]       dump each rank's stacks and the collective it waits in
          (a stalled job; docs/ranks.md)
  [b]S[/b]       save an SVG screenshot beside the session's files
  replay: [b]space[/b] play/pause, [b]← →[/b] 10 s, [b]+ -[/b] speed, [b]home end[/b]

Figures carry their source: [b]hook[/b] (in-process step timer), [b]NVML[/b],
[b]GPM[/b] (Hopper SM/tensor activity), [b]psutil[/b], [b]py-spy[/b].
N/A: not measured, never zero.

Press escape, q or ? to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,h,f1", "dismiss", "close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help-text")


class QuitScreen(ModalScreen[str]):
    """Asks what to do with a job that is still running: stop it, or leave it for later.
    Ctrl+C here leaves it running: a second reflexive Ctrl+C must not end hours of work."""

    BINDINGS = [
        Binding("s", "choose('stop')", "stop job", id="quit.stop"),
        Binding("l,ctrl+c", "choose('leave')", "leave running", id="quit.leave"),
        Binding("escape", "choose('cancel')", "cancel", id="quit.cancel"),
    ]

    def __init__(self, pid: int | None, owned: bool = True) -> None:
        super().__init__()
        self.pid = pid
        self.owned = owned

    def compose(self) -> ComposeResult:
        how = "Ctrl+C, then SIGTERM" if self.owned else "Ctrl+C, then SIGTERM, to that PID alone"
        with Vertical(id="quit-dialog"):
            yield Static(
                f"The job (PID {self.pid}) is still running.\n"
                f"  [b]s[/b]         stop it ({how})\n"
                "  [b]l[/b] [b]Ctrl+C[/b]  leave it running\n"
                "  [b]esc[/b]       cancel\n"
                f"A job left running can be watched again: gputop-train attach {self.pid}",
                id="quit-text",
            )
            with Horizontal():
                yield Button("Stop job", id="stop", variant="error")
                yield Button("Leave running", id="leave", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
