"""Messages between the TUI's parts: past tense for facts, imperative for requests. Each
carries its data, typed; none is answered through shared state."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ..session.phases import KnobState
from ..views import View
from ..wire import KnobValue


@dataclass
class SnapshotTaken(Message):
    """A view taken off the UI thread at refresh tick ``tick``; the app draws it. A newer one
    replaces it while it is still queued (a burst collapses to the latest view), and the app
    draws the once-a-second panels when a slow tick was among those it skipped."""

    view: View
    tick: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotTaken)


@dataclass
class ApplyKnob(Message):
    """The user picked a knob to change: flip a switch, or ask for its new value."""

    knob: KnobState


@dataclass
class KnobAnswered(Message):
    """The job answered a change of ``knob`` to ``value``: ``error`` is None when it is queued
    for the next step boundary, else why it was refused."""

    knob: KnobState
    value: KnobValue
    error: str | None
