"""The process table: the job's tree with CPU, memory, IO, GPU memory and SM % per process."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll

from ... import tables
from ...views import View
from ..widgets.live_text import LiveText
from . import text
from .base import SLOW, Panel, UiState


class ProcessesPanel(VerticalScroll, Panel):
    """The columns that fit its width, drawn again when the width changes. A column keeps the
    widest width it has had (and one that grows, grows to its room: tables.widened), and the
    table the most rows it has had: columns that jumped with every new figure, or a table that
    shrank and grew as workers came and went, rewrote every line of the table on the terminal
    and laid the screen out again."""

    TIER = SLOW

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: View | None = None
        self._widths: tuple[int, ...] = ()
        self._width = -1  # the panel's width the columns were chosen for

    def compose(self) -> ComposeResult:
        yield LiveText(classes="process-table", sticky=True)

    def show_view(self, view: View, ui: UiState) -> None:
        self._view = view
        self._draw(self.scrollable_content_region.width or 200)  # before layout: all

    def on_resize(self) -> None:
        """A new width: the columns that fit are chosen afresh. A new height alone (the
        findings above grew a line) keeps them and the rows kept: a table started afresh
        shrinks, then grows again, and each time the whole screen is laid out again."""
        if self.size.width == self._width:
            return
        self._width = self.size.width
        self._widths = ()
        self.query_one(LiveText).reset_extent()
        if self._view is not None:
            self._draw(self.scrollable_content_region.width)

    def _draw(self, width: int) -> None:
        assert self._view is not None
        procs = tables.process_lines(self._view.snap)
        rows = tables.cells(tables.PROCESS_COLUMNS, procs)
        now = tables.column_widths(tables.PROCESS_COLUMNS, rows)
        self._widths = tables.widened(tables.PROCESS_COLUMNS, self._widths, now)
        self.query_one(LiveText).show(text.process_text(procs, rows, width, self._widths))
