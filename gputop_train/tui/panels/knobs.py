"""The Knobs tab: the script's knobs, the autopilot, and the phase table that compares them."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...session.phases import KnobState
from ...views import View, ledger_lines
from ..messages import ApplyKnob
from ..widgets.live_text import LiveText
from . import text
from .base import Panel, UiState

# A value wider than this (a long choice, a path) does not push every knob's help across.
VALUE_COLUMN_MAX = 16


class KnobsPanel(OptionList, Panel):
    """One line per knob with its value in force; enter flips a switch or asks for a value
    (the app opens the editor), posted up as ``ApplyKnob``."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._names: tuple[str, ...] | None = None
        self._prompts: dict[str, Text] = {}
        self.knobs: dict[str, KnobState] = {}

    def show_view(self, view: View, ui: UiState) -> None:
        snap = view.snap
        ordered = sorted(snap.knobs, key=lambda k: k.builtin)  # the script's, then the hook's
        self.knobs = {k.name: k for k in ordered}
        names = tuple(self.knobs)
        # One column each for every knob's name and value, a space wider than the widest.
        name_width = max((len(k.name) + 1 for k in ordered), default=text.KNOB_NAME_COLUMN)
        values = (len(text.knob_value(k)) + 1 for k in ordered)
        value_width = min(VALUE_COLUMN_MAX, max(values, default=text.KNOB_VALUE_COLUMN))
        # The help wraps in its own column of the list's width (none yet before the layout).
        padding = self.get_component_styles("option-list--option").padding.width
        width = max(0, self.scrollable_content_region.width - padding) or None
        prompts = {
            k.name: text.knob_prompt(
                k,
                snap,
                max(text.KNOB_NAME_COLUMN, name_width),
                max(text.KNOB_VALUE_COLUMN, value_width),
                width,
            )
            for k in ordered
        }
        if names != self._names:
            self._names = names
            highlighted = self.highlighted
            self.clear_options()
            if names:
                self.add_options(_with_headings(ordered, prompts))
                index = min(highlighted or 0, self.option_count - 1)
                if self.get_option_at_index(index).disabled:  # a heading: the knob under it
                    index = min(index + 1, self.option_count - 1)
                self.highlighted = index
            else:
                self.add_option(
                    Option(Text("this script declares no knobs (see docs/knobs.md)", "dim"))
                )
        else:
            for name, prompt in prompts.items():
                if self._prompts.get(name) != prompt:
                    self.replace_option_prompt(name, prompt)
        self._prompts = prompts

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        knob = self.knobs.get(event.option.id or "")
        if knob is not None:
            self.post_message(ApplyKnob(knob))


BUILTIN_HEADING = "built-in (the hook's, any PyTorch job)"


def _with_headings(knobs: list[KnobState], prompts: dict[str, Text]) -> list[Option]:
    """The knobs' lines, under a heading for the script's and one for the hook's own."""
    options: list[Option] = []
    heading = None
    for knob in knobs:
        group = BUILTIN_HEADING if knob.builtin else "declared by the script"
        if group != heading:
            heading = group
            options.append(Option(Text(group, "bold underline"), disabled=True))
        options.append(Option(prompts[knob.name], id=knob.name))
    return options


class AutopilotPanel(LiveText, Panel):
    """The autopilot's state, plan and decisions, then its ledger (docs/autopilot.md)."""

    def show_view(self, view: View, ui: UiState) -> None:
        self.show(autopilot_text(view))


def autopilot_text(view: View) -> Text:
    """The panel's text: the state and last decisions, then start -> end, the kept rungs,
    the reverted ones, the edits left and the replay line."""
    out = text.autopilot_panel(view.snap)
    ledger = ledger_lines(view.snap.autopilot)
    if ledger:
        out.append("\n Ledger", style="bold")
        for line in ledger:
            style = "green" if line.startswith("kept") else "dim"
            style = "yellow" if line.startswith("edit left") else style
            out.append(f"\n {line}", style=style)
    return out


class PhasesPanel(VerticalScroll, Panel):
    """The columns that fit its width, drawn again when the width changes."""

    NEEDS_PHASES: ClassVar[bool] = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: View | None = None

    def compose(self) -> ComposeResult:
        yield LiveText(classes="phase-table")

    def show_view(self, view: View, ui: UiState) -> None:
        if view.phases:
            self._view = view
            self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self._view is not None:
            width = max(20, (self.size.width or 202) - 2)  # its padding; unlaid: everything
            self.query_one(LiveText).show(text.phase_table(self._view, width))
