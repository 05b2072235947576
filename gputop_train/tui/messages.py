"""Messages between the TUI's parts: past tense for facts, imperative for requests."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class SnapshotTaken(Message):
    """A new view is ready (taken off the UI thread); the app draws the latest one."""


class ApplyKnob(Message):
    """The user picked a knob to change: flip a switch, or ask for its new value."""

    def __init__(self, knob: Any) -> None:
        super().__init__()
        self.knob = knob


class KnobAnswered(Message):
    """The job answered a knob change: ``error`` is None when it is queued for the next step
    boundary, else why it was refused."""

    def __init__(self, name: str, value: Any, error: str | None) -> None:
        super().__init__()
        self.name, self.value, self.error = name, value, error
