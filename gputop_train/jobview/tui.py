"""The job view's TUI (Textual): the job's headline, its findings with where to ssh, a row per
node (the worst first; the table scrolls past the screen), and a row per rank on ``r``.
Keyboard only. A worker thread reads and judges the job every interval (watch.py) and posts
the view; the app only draws it, in tables that draw the rows in view alone (rows_table.py:
a 1,000-node job's 8,000 ranks)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Static

from ..format import ms, pct
from .figures import SourceError
from .rows_table import RowsTable
from .view import JobView, NodeRow, RankRow, headline_line
from .watch import JobWatch

NODE_COLUMNS = ("node", "host", "ranks", "step", "data", "comm", "GPU", "worst rank")
RANK_COLUMNS = ("rank", "node", "host", "pid", "step", "data", "input", "comm", "lags")


@dataclass
class ViewTaken(Message):
    """A view read and judged off the UI thread (a newer one replaces one still queued)."""

    view: JobView | None
    problem: str | None = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ViewTaken)


class JobApp(App[None]):
    """``watch``: the source and the history; ``interval``: seconds between reads."""

    TITLE = "gputop-train job"
    CSS = """
    #headline { height: auto; max-height: 3; background: $boost; }
    #findings { height: auto; max-height: 6; color: $warning; }
    RowsTable { height: 1fr; }
    #ranks { display: none; }
    JobApp.ranks #ranks { display: block; }
    JobApp.ranks #nodes { height: 1fr; }
    """
    BINDINGS = [
        Binding("q", "quit", "quit", id="job.quit"),
        Binding("r", "toggle_ranks", "ranks", id="job.ranks"),
        Binding("tab", "focus_next", "next table", show=False, id="job.next"),
    ]

    def __init__(self, watch: JobWatch, interval: float) -> None:
        super().__init__()
        self._watch = watch
        self._interval = interval
        self.view: JobView | None = None

    def compose(self) -> ComposeResult:
        yield Static("reading the job...", id="headline")
        yield Static("", id="findings")
        yield RowsTable(NODE_COLUMNS, id="nodes")
        yield RowsTable(RANK_COLUMNS, id="ranks")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#nodes", RowsTable).focus()
        self._read()
        self.set_interval(self._interval, self._read)

    @work(thread=True, exclusive=True, group="read")
    def _read(self) -> None:
        try:
            if self._watch.history.windows() == [] and self.view is None:
                self._watch.backfill()
            self.post_message(ViewTaken(self._watch.refresh()))
        except SourceError as error:
            self.post_message(ViewTaken(None, str(error)))

    def on_view_taken(self, message: ViewTaken) -> None:
        if message.view is None:
            self.query_one("#findings", Static).update(f"cannot read the job: {message.problem}")
            return
        self.view = view = message.view
        self.query_one("#headline", Static).update(headline_line(view))
        findings = [f.text + (f"\n  -> {f.ssh}" if f.ssh else "") for f in view.findings[:3]]
        self.query_one("#findings", Static).update("\n".join(findings))
        self.query_one("#nodes", RowsTable).set_rows([_node_cells(n) for n in view.nodes])
        if self.has_class("ranks"):
            self.query_one("#ranks", RowsTable).set_rows([_rank_cells(r) for r in view.ranks])

    def action_toggle_ranks(self) -> None:
        self.toggle_class("ranks")
        ranks = self.query_one("#ranks", RowsTable)
        if self.has_class("ranks") and self.view is not None:
            ranks.set_rows([_rank_cells(r) for r in self.view.ranks])
            ranks.focus()
        else:
            self.query_one("#nodes", RowsTable).focus()


def _node_cells(node: NodeRow) -> tuple[str, ...]:
    worst = (
        f"{node.worst_rank} {node.worst_cause} +{ms(node.lag_ms)}"
        if node.worst_rank is not None
        else ("-" if node.state == "running" else node.state)
    )
    ranks = ",".join(map(str, node.ranks)) if len(node.ranks) <= 3 else f"{len(node.ranks)}"
    return (
        node.node,
        node.host,
        ranks,
        ms(node.step_ms),
        pct(node.data_wait_pct),
        ms(node.comm_ms),
        pct(node.gpu_util_pct),
        worst,
    )


def _rank_cells(rank: RankRow) -> tuple[str, ...]:
    return (
        str(rank.rank),
        rank.node,
        rank.host,
        str(rank.pid),
        ms(rank.step_ms),
        pct(rank.data_wait_pct),
        ms(rank.input_ms),
        ms(rank.comm_ms),
        f"{ms(rank.lag_ms)} {rank.lag_cause}" if rank.lag_ms else "-",
    )


def run_tui(watch: JobWatch, interval: float) -> int:
    JobApp(watch, interval).run()
    return 0
