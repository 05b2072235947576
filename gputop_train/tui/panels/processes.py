"""The process table: the job's tree with CPU, memory, IO, GPU memory and SM % per process."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll

from ...views import View
from ..widgets.live_text import LiveText
from . import text
from .base import SLOW, Panel, UiState


class ProcessesPanel(VerticalScroll, Panel):
    """The columns that fit its width, drawn again when the width changes."""

    TIER = SLOW

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: View | None = None

    def compose(self) -> ComposeResult:
        yield LiveText(classes="process-table")

    def show_view(self, view: View, ui: UiState) -> None:
        self._view = view
        width = self.size.width or 200  # before the first layout: everything
        self.query_one(LiveText).show(text.process_table(view.snap, width))

    def on_resize(self) -> None:
        if self._view is not None:
            self.query_one(LiveText).show(text.process_table(self._view.snap, self.size.width))
