"""The knobs in force and the phases they open: a knob's state follows its requests and the
primary process's outcomes; an applied change opens a phase at the step after it, a revert
marks the phase it ends as failed (docs/phases.md). The session holds one, under its lock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .. import events
from .phases import KnobState, Phase, knob_state


class KnobPhases:
    def __init__(self, started_at: float) -> None:
        self.knobs: dict[str, KnobState] = {}
        self.phases: list[Phase] = [Phase(1, "start", 1, started_at)]
        self._seq: dict[int, int] = {}  # per PID, the last outcome taken (its hook's count)

    def declared(self, specs: Iterable[dict[str, Any]]) -> None:
        """The knobs the primary process advertised; a change asked for stays pending."""
        for spec in specs:
            state = knob_state(spec)
            if state is not None:
                old = self.knobs.get(state.name)
                self.knobs[state.name] = replace(state, pending=old.pending if old else None)

    def requested(self, name: str, value: Any) -> None:
        if name in self.knobs:
            self.knobs[name] = replace(self.knobs[name], pending=value, error=None)

    def outcome(self, item: events.KnobOutcome, now: float) -> list[Phase]:
        """The primary process's outcome: the value in force; the phases it opened or
        changed (a real change opens one), for the session to tell."""
        name, step = item.name, item.step
        if name not in self.knobs:
            return []
        if item.seq is not None:  # the hello's history and a live frame can overlap
            if item.seq <= self._seq.get(item.pid, 0):
                return []
            self._seq[item.pid] = item.seq
        ok, value = item.ok, item.value
        if not isinstance(value, (bool, int, str)):
            return []  # not an outcome a hook sends: no value in force to show
        error = None if ok else (item.error or "refused")
        self.knobs[name] = replace(self.knobs[name], value=value, pending=None, error=error)
        if step is None:
            return []
        t = item.t if item.t is not None else now
        before = list(self.phases)
        current = self.phases[-1]
        if item.reverted:
            revert = f"revert {name}={value}"
            if current.first_step == step + 1 and current.change.startswith("revert"):
                self.phases[-1] = replace(current, change=f"{current.change}, {revert}")
            else:
                self.phases[-1] = replace(current, failed=error)
                self.phases.append(Phase(len(self.phases) + 1, revert, step + 1, t))
        elif ok and value != item.previous:
            change = f"{name}={value}"
            if current.first_step == step + 1:  # several changes at one boundary
                self.phases[-1] = replace(current, change=f"{current.change}, {change}")
            else:
                self.phases.append(Phase(len(self.phases) + 1, change, step + 1, t))
        return [p for i, p in enumerate(self.phases) if i >= len(before) or p != before[i]]

    def workers_max(self) -> int | None:
        """The most workers the job's workers knob takes: the script's knob before the hook's
        built-in one, as the autopilot picks the knob that carries a change."""
        usable = [k for k in self.knobs.values() if k.role == "workers" and not k.unavailable]
        usable.sort(key=lambda k: k.builtin)
        return usable[0].maximum if usable else None
