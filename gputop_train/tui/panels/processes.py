"""The process table: the job's tree with CPU, memory, IO, GPU memory and SM % per process."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll

from ...views import View
from ..widgets.live_text import LiveText
from . import text
from .base import SLOW, Panel, UiState


class ProcessesPanel(VerticalScroll, Panel):
    TIER = SLOW

    def compose(self) -> ComposeResult:
        yield LiveText(classes="process-table")

    def show_view(self, view: View, ui: UiState) -> None:
        self.query_one(LiveText).show(text.process_table(view.snap))
