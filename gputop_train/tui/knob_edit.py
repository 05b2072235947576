"""Editing one knob: a switch flips in place; a choice or a number opens this dialog."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..session.phases import KnobState
from ..wire import KnobValue


class KnobEditScreen(ModalScreen[KnobValue | None]):
    """Returns the new value (a number as typed: the job's side parses it), or None when
    cancelled."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="knob.cancel")]

    def __init__(self, knob: KnobState) -> None:
        super().__init__()
        self.knob = knob

    def compose(self) -> ComposeResult:
        knob = self.knob
        with Vertical(id="knob-dialog"):
            yield Static(f"[b]{knob.name}[/b] = {knob.value}\n{knob.help}")
            if knob.kind == "choice":
                options = [Option(str(c), id=str(i)) for i, c in enumerate(knob.choices or ())]
                yield OptionList(*options, id="knob-choices")
            else:
                bounds = f"{knob.minimum}..{knob.maximum}"
                yield Input(str(knob.value), type="integer", id="knob-input", placeholder=bounds)
            yield Static("[dim]enter: apply at the next step boundary   esc: cancel[/dim]")

    def on_mount(self) -> None:
        if self.knob.kind == "choice" and self.knob.choices:
            choices = self.query_one(OptionList)
            if self.knob.value in self.knob.choices:
                choices.highlighted = self.knob.choices.index(self.knob.value)
            choices.focus()
        else:
            self.query_one(Input).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss((self.knob.choices or ())[int(event.option.id or 0)])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
