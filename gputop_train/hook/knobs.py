"""Knobs a script declares, and the changes to them, applied on the training thread.

A change arrives on the listener thread, is validated there (a bad value is refused at
once), queued, and applied by the training thread at the next step boundary. A callback that
raises is reverted to the previous value; a failure that shows only later (an OOM in the next
forward, a compile error) can be reported by the script with ``revert_last_change``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import wire


@dataclass
class Knob:
    name: str
    value: Any
    apply: Callable[[Any], None]
    help: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    role: str | None = None  # what it does, for the autopilot (docs/knobs.md)
    builtin: bool = False  # offered by the hook to any job (builtin_knobs.py), not declared
    unavailable: str | None = None  # why this job cannot take it: every change is refused
    numerics: str | None = None  # how a change alters the job's numerics, said with it

    @property
    def kind(self) -> str:
        if self.choices is not None:
            return "choice"
        return "bool" if isinstance(self.value, bool) else "int"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "value": self.value,
            "help": self.help,
            "choices": list(self.choices) if self.choices is not None else None,
            "min": self.minimum,
            "max": self.maximum,
            "role": self.role,
            "builtin": self.builtin,
            "unavailable": self.unavailable,
            "numerics": self.numerics,
        }


# A change that survived this many steps is confirmed: a later failure is not its doing.
CONFIRM_AFTER_STEPS = 20


@dataclass
class _Change:
    request_id: Any
    name: str
    value: Any
    typed_by_hand: bool = False  # a --schedule entry: "8" for 8, "on" for true
    at_step: int | None = None  # several ranks: apply after exactly this step, on each


@dataclass
class KnobBoard:
    """The knobs of one process and the queue of changes waiting for a step boundary."""

    knobs: dict[str, Knob] = field(default_factory=dict)
    schedule: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    _queue: deque[_Change] = field(default_factory=deque)
    # Frames for the monitors, bounded: without a monitor they wait for the first one.
    _outbox: deque[bytes] = field(default_factory=lambda: deque(maxlen=256))
    # The changes applied at the last boundary: (step, [(name, previous, request id), ...]).
    _last_applied: tuple[int, list[tuple[str, Any, Any]]] | None = None
    # Every outcome, numbered: a monitor that connects late replays it from the hello.
    history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=1000))
    _seq: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def declare(self, knob: Knob) -> None:
        self.knobs[knob.name] = knob
        self._outbox.append(wire.Knobs(self.describe()).encode())

    def declare_builtin(self, knobs: list[Knob]) -> None:
        """The hook's own knobs, in one frame; a name the script declared stays the script's.
        Declared again (the loop moved to a new optimizer), they replace the earlier ones."""
        for knob in knobs:
            earlier = self.knobs.get(knob.name)
            if earlier is None or earlier.builtin:
                self.knobs[knob.name] = knob
        self._outbox.append(wire.encode(wire.KNOBS, knobs=self.describe()))

    def describe(self) -> list[dict[str, Any]]:
        return [k.describe() for k in self.knobs.values()]

    # -- listener thread ------------------------------------------------------------------

    def request(self, frame: dict[str, Any]) -> None:
        """A set_knob frame: refuse a bad one at once, queue a good one for the boundary."""
        name, request_id = frame.get("name"), _echoed(frame.get("id"))
        knob = self.knobs.get(name) if isinstance(name, str) else None
        if knob is None:
            error = f"no knob named {wire.shown(name)}"
            self._refuse(request_id, _echoed(name), None, error)
            return
        if knob.unavailable:
            self._refuse(request_id, knob.name, knob.value, knob.unavailable)
            return
        try:
            value = wire.validate_knob(knob.describe(), frame.get("value"))
        except ValueError as error:
            self._refuse(request_id, knob.name, knob.value, str(error))
            return
        at_step = frame.get("at_step")
        at_step = at_step if type(at_step) is int else None
        with self._lock:
            self._queue.append(_Change(request_id, knob.name, value, at_step=at_step))

    def set_schedule(self, entries_json: str) -> None:
        """Scheduled changes from the launcher (``wire.SCHEDULE_ENV``); bad JSON raises."""
        entries = []
        for entry in json.loads(entries_json):
            if isinstance(entry, dict) and isinstance(entry.get("step"), int):
                entries.append((entry["step"], dict(entry.get("set") or {})))
        with self._lock:
            self.schedule = sorted(entries, key=lambda e: e[0])

    def take_outbox(self) -> list[bytes]:
        frames = []
        while self._outbox:
            frames.append(self._outbox.popleft())
        return frames

    # -- training thread ------------------------------------------------------------------

    def apply_pending(self, step: int) -> bool:
        """At a step boundary: due scheduled changes, then requested ones, in order. True when
        a knob took a new value (the probes look at the new configuration)."""
        if self._last_applied is not None and step - self._last_applied[0] > CONFIRM_AFTER_STEPS:
            self._last_applied = None
        if not self._queue and not (self.schedule and self.schedule[0][0] <= step):
            return False
        if self._queue and not self.schedule:
            with self._lock:  # the listener thread appends to the queue
                later = all(c.at_step is not None and c.at_step > step for c in self._queue)
            if later:
                return False  # only changes meant for a later step wait
        with self._lock:
            due: list[_Change] = []
            while self.schedule and self.schedule[0][0] <= step:
                _, settings = self.schedule.pop(0)
                due += [_Change(f"schedule@{step}", n, v, True) for n, v in settings.items()]
            waiting = [c for c in self._queue if c.at_step is not None and c.at_step > step]
            due += [c for c in self._queue if c.at_step is None or c.at_step <= step]
            self._queue = deque(waiting)
        for change in due:
            if change.at_step is not None and change.at_step < step:
                # Another rank applies it after step at_step: this one is past it already.
                error = f"{wire.LATE_FOR_STEP} {change.at_step}, the step every rank applies it at"
                knob = self.knobs.get(change.name)
                value = knob.value if knob is not None else None
                self._ack(change.request_id, change.name, value, value, False, error, step)
                continue
            self._apply(change, step)
        return self._last_applied is not None and self._last_applied[0] == step

    def _apply(self, change: _Change, step: int) -> None:
        knob = self.knobs.get(change.name)
        if knob is None:
            self._ack(change.request_id, change.name, None, None, False, "no such knob", step)
            return
        try:
            check = wire.parse_knob if change.typed_by_hand else wire.validate_knob
            value = check(knob.describe(), change.value)
        except ValueError as error:
            self._ack(change.request_id, knob.name, knob.value, knob.value, False, str(error), step)
            return
        previous = knob.value
        if value == previous:
            self._ack(change.request_id, knob.name, value, previous, True, None, step)
            return
        try:
            knob.apply(value)
        except Exception as error:  # the script could not take it: put the old value back
            self._restore(knob, previous)
            self._ack(change.request_id, knob.name, previous, value, False, _short(error), step)
            return
        knob.value = value
        if self._last_applied is None or self._last_applied[0] != step:
            self._last_applied = (step, [])
        self._last_applied[1].append((knob.name, previous, change.request_id))
        self._ack(change.request_id, knob.name, value, previous, True, None, step)

    def applied_at(self, step: int) -> list[tuple[str, Any, Any]]:
        """The changes applied at the boundary after ``step``: (knob, previous, request id)."""
        if self._last_applied is None or self._last_applied[0] != step:
            return []
        return list(self._last_applied[1])

    def revert_last_change(self, error: str, step: int) -> bool:
        """The last changes failed after they were applied (OOM, compile error): undo all
        that were applied at that boundary, newest first."""
        if self._last_applied is None:
            return False
        _, changes = self._last_applied
        self.revert_changes(changes, error, step)
        return True

    def revert_changes(self, changes: list[tuple[str, Any, Any]], error: str, step: int) -> None:
        """Undo ``changes`` (as ``applied_at`` gave them), newest first, and say why."""
        if self._last_applied is not None and self._last_applied[1] == changes:
            self._last_applied = None
        for name, previous, request_id in reversed(changes):
            knob = self.knobs[name]
            failed_value = knob.value
            self._restore(knob, previous)
            self._ack(request_id, name, knob.value, failed_value, False, error, step, reverted=True)

    def _restore(self, knob: Knob, previous: Any) -> None:
        try:
            knob.apply(previous)
            knob.value = previous
        except Exception as error:  # even the old value does not apply: say so, keep going
            self._outbox.append(
                wire.Notice(f"knob {knob.name}: revert failed: {_short(error)}").encode()
            )

    def _refuse(self, request_id: Any, name: Any, value: Any, error: str) -> None:
        """A request refused as it arrived: told to the monitors now, kept out of the history
        (it changed nothing, and a flood of them must not crowd out what did)."""
        outcome = {"id": request_id, "name": name, "value": value, "previous": value}
        outcome |= {"ok": False, "error": error, "step": None, "reverted": False, "t": time.time()}
        self._outbox.append(wire.KnobApplied(**outcome).encode())

    def _ack(
        self,
        request_id: Any,
        name: Any,
        value: Any,
        previous: Any,
        ok: bool,
        error: str | None,
        step: int | None,
        reverted: bool = False,
    ) -> None:
        self._seq += 1
        outcome = {
            "seq": self._seq,
            "id": request_id,
            "name": name,
            "value": value,
            "previous": previous,
            "ok": ok,
            "error": None if error is None else error[:MAX_ERROR_CHARS],
            "step": step,
            "reverted": reverted,
            "t": time.time(),
        }
        self.history.append(outcome)
        self._outbox.append(wire.KnobApplied(**outcome).encode())


# An error text in an outcome (a script's own revert reason can be anything).
MAX_ERROR_CHARS = 300
# What an outcome echoes of a request: a monitor's ids are small numbers or short strings.
MAX_ECHO_CHARS = 64
_MAX_ECHO_INT = 2**53  # exact in every JSON reader


def _echoed(value: object) -> Any:
    """``value`` as an outcome may carry it back: as it is when small, else cut to a short
    text (a refusal never echoes a megabyte into every monitor's hello)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) <= _MAX_ECHO_INT:
        return value
    if isinstance(value, str) and len(value) <= MAX_ECHO_CHARS:
        return value
    return wire.shown(value, MAX_ECHO_CHARS)


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
