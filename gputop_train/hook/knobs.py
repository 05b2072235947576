"""Knobs a script declares, and the changes to them, applied on the training thread.

A change arrives on the listener thread, is validated there (a bad value is refused at
once), queued, and applied by the training thread at the next step boundary. A callback that
raises is reverted to the previous value; a failure that shows only later (an OOM in the next
forward, a compile error) can be reported by the script with ``revert_last_change``.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import wire
from .listener import MAX_CLIENTS


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

# How far past the current step a change may ask to wait (``at_step``). An honest monitor asks
# for the furthest step any rank reported plus ~2 s of steps (monitor.RANKS_AHEAD_S): 2,000
# steps for a 1,000-steps/s loop; this leaves 50x that for a rank the monitor has not heard
# from lately. A change further ahead is refused with this reason (issue 39: 10**15 queued
# changes were held for ever).
MAX_STEPS_AHEAD = 100_000
# Changes waiting for their step, from all clients and from one: an honest monitor has one
# trial's few knobs waiting at a time (the autopilot's trial changes 1-3 knobs at once). Each
# of the listener's MAX_CLIENTS connections has its own share of the whole, so the clients
# connected at once can never fill it: 4 clients of 64 each locked every other monitor out for
# up to MAX_STEPS_AHEAD steps (issue 46). The total still bounds what clients that left hold
# for the next boundary (applied, and gone, at that boundary).
MAX_WAITING = 256
MAX_WAITING_PER_CLIENT = MAX_WAITING // MAX_CLIENTS
# Monitors that left, remembered for a trial being applied as they leave: more than the
# listener's 8 clients could turn over within one step.
MAX_GONE_KEPT = 256
# Outcomes kept for the monitors between two sends (the listener sends every 0.5 s): more
# than this at once are dropped, oldest first, and counted in a notice.
MAX_OUTBOX = 256


@dataclass
class _Change:
    request_id: Any
    name: str
    value: Any
    typed_by_hand: bool = False  # a --schedule entry: "8" for 8, "on" for true
    at_step: int | None = None  # several ranks: apply after exactly this step, on each
    client: int | None = None  # the listener's number of the monitor that asked
    trial: bool = False  # a trial (--try, the autopilot): undone if its monitor leaves first
    dropped: bool = False  # its monitor left before its step: skipped when due


@dataclass
class _Trial:
    """A trial in force: the monitor that asked, the value it set and the one before it."""

    client: int
    value: Any
    previous: Any


@dataclass
class KnobBoard:
    """The knobs of one process and the queue of changes waiting for a step boundary."""

    knobs: dict[str, Knob] = field(default_factory=dict)
    schedule: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # Changes for the next boundary, in order of arrival.
    _queue: deque[_Change] = field(default_factory=deque)
    # Changes for a later step, a heap keyed by (at_step, arrival): a boundary looks at its
    # head only, so a step costs the same whatever waits (issue 39).
    _later: list[tuple[int, int, _Change]] = field(default_factory=list)
    _arrivals: itertools.count[int] = field(default_factory=itertools.count)
    _waiting_by_client: dict[int | None, int] = field(default_factory=dict)
    _dropped_in_heap: int = 0  # entries of _later whose monitor left, not yet popped
    # The trials in force, by knob: undone at the next boundary once their monitor leaves.
    _trials: dict[str, _Trial] = field(default_factory=dict)
    _orphaned: set[int] = field(default_factory=set)  # monitors gone with a trial in force
    _gone: dict[int, None] = field(default_factory=dict)  # the last monitors that left
    # The last step boundary seen (the training thread writes it, the listener reads it).
    step: int = 0
    # Frames for the monitors, bounded: without a monitor they wait for the first one.
    _outbox: deque[bytes] = field(default_factory=lambda: deque(maxlen=MAX_OUTBOX))
    dropped_outcomes: int = 0  # frames pushed out of the full outbox, said in a notice
    _dropped_told: int = 0
    # The changes applied at the last boundary: (step, [(name, previous, request id), ...]).
    _last_applied: tuple[int, list[tuple[str, Any, Any]]] | None = None
    # Every outcome, numbered: a monitor that connects late replays it from the hello.
    history: deque[wire.KnobApplied] = field(default_factory=lambda: deque(maxlen=1000))
    _seq: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Lines for the job's stderr (the agent prints them): trials undone for a monitor gone.
    trial_reverts: deque[str] = field(default_factory=lambda: deque(maxlen=64))

    def declare(self, knob: Knob) -> None:
        self.knobs[knob.name] = knob
        self._post(wire.Knobs(self.describe()).encode())

    def declare_builtin(self, knobs: list[Knob]) -> None:
        """The hook's own knobs, in one frame; a name the script declared stays the script's.
        Declared again (the loop moved to a new optimizer), they replace the earlier ones."""
        for knob in knobs:
            earlier = self.knobs.get(knob.name)
            if earlier is None or earlier.builtin:
                self.knobs[knob.name] = knob
        self._post(wire.Knobs(self.describe()).encode())

    def describe(self) -> list[dict[str, Any]]:
        return [k.describe() for k in self.knobs.values()]

    # -- listener thread ------------------------------------------------------------------

    def request(self, frame: wire.SetKnob, client: int | None = None) -> None:
        """A set_knob frame from monitor ``client``: refuse a bad one at once (a bad value, a
        step too far ahead, too many waiting), queue a good one for its boundary."""
        name, request_id = frame.name, _echoed(frame.id)
        knob = self.knobs.get(name) if isinstance(name, str) else None
        if knob is None:
            error = f"no knob named {wire.shown(name)}"
            self._refuse(request_id, _echoed(name), None, error)
            return
        if knob.unavailable:
            self._refuse(request_id, knob.name, knob.value, knob.unavailable)
            return
        try:
            value = wire.validate_knob(knob.describe(), frame.value)
        except ValueError as error:
            self._refuse(request_id, knob.name, knob.value, str(error))
            return
        at_step = frame.at_step
        if at_step is not None and at_step < 0:
            negative = f"{NOT_A_STEP} {at_step} (the change applies after that step)"
            self._refuse(request_id, knob.name, knob.value, negative)
            return
        if at_step is not None and at_step > self.step + MAX_STEPS_AHEAD:
            far = (
                f"{wire.TOO_FAR_AHEAD} {at_step}: this process is at step {self.step} and takes "
                f"a change at most {MAX_STEPS_AHEAD} steps ahead"
            )
            self._refuse(request_id, knob.name, knob.value, far)
            return
        trial = frame.trial is True
        change = _Change(request_id, knob.name, value, at_step=at_step, client=client, trial=trial)
        with self._lock:
            refusal = self._over_bounds(client)
            if refusal is None:
                self._waiting_by_client[client] = self._waiting_by_client.get(client, 0) + 1
                if at_step is None:
                    self._queue.append(change)
                else:
                    heapq.heappush(self._later, (at_step, next(self._arrivals), change))
        if refusal is not None:
            self._refuse(request_id, knob.name, knob.value, refusal)

    def refuse_malformed(self, raw: dict[str, Any], error: str) -> None:
        """A set_knob frame whose fields are not of their types (``at_step`` of ``true``,
        ``1.5``, ``"5"``): refused with the reason, its id and name echoed as sent, never
        dropped unsaid (issue 46)."""
        name = raw.get("name")
        knob = self.knobs.get(name) if isinstance(name, str) else None
        value = knob.value if knob is not None else None
        self._refuse(_echoed(raw.get("id")), _echoed(name), value, f"{MALFORMED}: {error}")

    def _over_bounds(self, client: int | None) -> str | None:
        """Why one more change from ``client`` may not wait (the lock held), or None."""
        waiting = self._waiting_by_client.get(client, 0)
        if waiting >= MAX_WAITING_PER_CLIENT:
            most = MAX_WAITING_PER_CLIENT
            return f"{wire.TOO_MANY_WAITING}: {waiting} from this monitor (at most {most})"
        total = len(self._queue) + len(self._later) - self._dropped_in_heap
        if total >= MAX_WAITING:
            return f"{wire.TOO_MANY_WAITING}: {total} from all monitors (at most {MAX_WAITING})"
        return None

    def client_left(self, client: int) -> None:
        """Monitor ``client`` hung up (listener thread). Its changes for a later step are
        dropped, each with an outcome; those for the next boundary still apply (a one-shot
        client sends one and leaves). A trial of its own still in force is undone at the
        next boundary (``apply_pending``)."""
        dropped: list[_Change] = []
        with self._lock:
            for _, _, change in self._later:
                if change.client == client and not change.dropped:
                    change.dropped = True
                    dropped.append(change)
            self._dropped_in_heap += len(dropped)
            # A trial not yet applied goes too: nobody would be there to measure or undo it.
            staying: deque[_Change] = deque()
            for change in self._queue:
                (dropped if change.client == client and change.trial else staying).append(change)
            self._queue = staying
            self._waiting_by_client[client] = self._waiting_by_client.get(client, 0) - len(dropped)
            if self._waiting_by_client[client] <= 0:
                del self._waiting_by_client[client]
            if self._dropped_in_heap > len(self._later) // 2:  # compact: memory stays bounded
                self._later = [entry for entry in self._later if not entry[2].dropped]
                heapq.heapify(self._later)
                self._dropped_in_heap = 0
            if any(trial.client == client for trial in self._trials.values()):
                self._orphaned.add(client)
            self._gone[client] = None
            while len(self._gone) > MAX_GONE_KEPT:
                del self._gone[next(iter(self._gone))]
        for change in dropped:
            when = "its step" if change.at_step is None else f"step {change.at_step}"
            error = f"{wire.MONITOR_LEFT} before {when}: dropped"
            knob = self.knobs.get(change.name)
            self._refuse(change.request_id, change.name, knob.value if knob else None, error)

    def set_schedule(self, entries_json: str) -> None:
        """Scheduled changes from the launcher (``wire.SCHEDULE_ENV``); bad JSON raises."""
        entries = []
        for entry in json.loads(entries_json):
            if isinstance(entry, dict) and isinstance(entry.get("step"), int):
                entries.append((entry["step"], dict(entry.get("set") or {})))
        with self._lock:
            self.schedule = sorted(entries, key=lambda e: e[0])

    def take_outbox(self) -> list[bytes]:
        """What waits for the monitors, oldest first; first of all, a notice of how many
        outcomes the full outbox pushed out since the last one (none vanish unsaid)."""
        frames = []
        dropped = self.dropped_outcomes - self._dropped_told
        if dropped:
            self._dropped_told += dropped
            frames.append(
                wire.Notice(
                    f"{dropped} knob outcome(s) dropped: more than {MAX_OUTBOX} at once "
                    "(the hello's knob history keeps every applied change)"
                ).encode()
            )
        while self._outbox:
            frames.append(self._outbox.popleft())
        return frames

    def _post(self, frame: bytes) -> None:
        """Queue a frame for the monitors; a full outbox drops its oldest, counted."""
        if len(self._outbox) == self._outbox.maxlen:
            self.dropped_outcomes += 1
        self._outbox.append(frame)

    # -- training thread ------------------------------------------------------------------

    def apply_pending(self, step: int) -> bool:
        """At a step boundary: trials of monitors that left undone, due scheduled changes,
        then requested ones, in order. True when a knob took a new value (the probes look at
        the new configuration). O(1) when nothing is due, whatever waits for a later step."""
        self.step = step
        if self._last_applied is not None and step - self._last_applied[0] > CONFIRM_AFTER_STEPS:
            self._last_applied = None
        later = self._later
        if (
            not self._queue
            and not self._orphaned
            and not (later and later[0][0] <= step)
            and not (self.schedule and self.schedule[0][0] <= step)
        ):
            return False
        with self._lock:
            orphaned, self._orphaned = self._orphaned, set()
            due: list[_Change] = []
            while self.schedule and self.schedule[0][0] <= step:
                _, settings = self.schedule.pop(0)
                due += [_Change(f"schedule@{step}", n, v, True) for n, v in settings.items()]
            while self._later and self._later[0][0] <= step:
                _, _, change = heapq.heappop(self._later)
                if change.dropped:
                    self._dropped_in_heap -= 1
                    continue
                due.append(change)
            due += self._queue
            self._queue = deque()
            for change in due:
                self._uncount(change.client)
        if orphaned:
            self._undo_orphaned_trials(orphaned, step)
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

    def _uncount(self, client: int | None) -> None:
        """One change of ``client`` no longer waits (the lock held)."""
        left = self._waiting_by_client.get(client, 0) - 1
        if left > 0:
            self._waiting_by_client[client] = left
        else:
            self._waiting_by_client.pop(client, None)

    def _undo_orphaned_trials(self, clients: set[int], step: int) -> None:
        """The trials of monitors that left, put back to the value before them (a knob that
        someone changed since is no longer theirs), said on the job's stderr and to the
        monitors."""
        with self._lock:
            undone = [(n, t) for n, t in self._trials.items() if t.client in clients]
            for name, _ in undone:
                del self._trials[name]
        for name, trial in undone:
            knob = self.knobs.get(name)
            if knob is None or knob.value != trial.value:
                continue
            self._restore(knob, trial.previous)
            error = f"{wire.MONITOR_LEFT} during its trial: reverted to {trial.previous!r}"
            self._ack(None, name, knob.value, trial.value, False, error, step, reverted=True)
            self.trial_reverts.append(f"knob {name}: {error} at step {step}")

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
        self._own_trial(change, knob.name, value, previous)
        if self._last_applied is None or self._last_applied[0] != step:
            self._last_applied = (step, [])
        self._last_applied[1].append((knob.name, previous, change.request_id))
        self._ack(change.request_id, knob.name, value, previous, True, None, step)

    def _own_trial(self, change: _Change, name: str, value: Any, previous: Any) -> None:
        """Who a knob's value belongs to now: a trial change makes it its monitor's (the value
        before the first trial is the one to come back to); a kept change, or a trial's own
        revert to that value, makes it nobody's."""
        with self._lock:  # the listener's thread reads the trials when a client leaves
            earlier = self._trials.pop(name, None)
            if not change.trial or change.client is None:
                return
            back_to = earlier.previous if earlier is not None else previous
            if value != back_to:
                self._trials[name] = _Trial(change.client, value, back_to)
                if change.client in self._gone:  # it left while this was being applied
                    self._orphaned.add(change.client)

    def keep_trials(self, client: int, names: list[str]) -> None:
        """Monitor ``client`` keeps its trials of ``names`` (the autopilot decided): they
        stay when it leaves (listener thread)."""
        with self._lock:
            for name in names:
                trial = self._trials.get(name)
                if trial is not None and trial.client == client:
                    del self._trials[name]

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
            self._post(wire.Notice(f"knob {knob.name}: revert failed: {_short(error)}").encode())

    def _refuse(self, request_id: Any, name: Any, value: Any, error: str) -> None:
        """A request refused as it arrived: told to the monitors now, kept out of the history
        (it changed nothing, and a flood of them must not crowd out what did)."""
        outcome = wire.KnobApplied(
            id=request_id, name=name, value=value, previous=value, ok=False, error=error,
            step=None, reverted=False, t=time.time(),
        )  # fmt: skip
        self._post(outcome.encode())

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
        outcome = wire.KnobApplied(
            seq=self._seq,
            id=request_id,
            name=name,
            value=value,
            previous=previous,
            ok=ok,
            error=None if error is None else error[:MAX_ERROR_CHARS],
            step=step,
            reverted=reverted,
            t=time.time(),
        )
        self.history.append(outcome)
        self._post(outcome.encode())


# How a refusal of a change whose fields are not of their types begins, and of a negative step.
MALFORMED = "malformed set_knob"
NOT_A_STEP = "at_step must be a step number, 0 or more, not"

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
