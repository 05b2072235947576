"""From findings to knob changes: each finding's proposed changes, carried by the knobs whose
declared role matches, sized by the evidence (docs/knobs.md lists the roles)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..advise.rules import MEMORY_NEAR_LIMIT, Change, Finding
from ..session.phases import KnobState
from ..session.stats import Observation
from ..wire import KnobValue


@dataclass(frozen=True)
class Candidate:
    """One change to try: knob values to set together, and where the idea came from."""

    settings: tuple[tuple[str, object], ...]  # (knob, value), applied at one step boundary
    previous: tuple[tuple[str, object], ...]  # the values they replace (a revert sets these)
    source: str  # the finding's id, or "requested" for --try
    predicted_gain: float | None = None  # the speed-up the finding expects, where it says one

    @property
    def label(self) -> str:
        return ";".join(f"{name}={_text(value)}" for name, value in self.settings)

    def in_force(self, knobs: Iterable[KnobState]) -> bool:
        """Whether every knob already holds its value (nothing left to try)."""
        values = {k.name: k.value for k in knobs}
        return all(values.get(name) == value for name, value in self.settings)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def candidates(
    found: Sequence[Finding], knobs: Iterable[KnobState], observation: Observation | None
) -> list[Candidate]:
    """Every change the findings propose that a knob can carry, best finding first (those
    already in force included: a finding can outlive its fix by a window). A knob the script
    declared carries its role before the hook's built-in one; one this job cannot take
    (``unavailable``) carries nothing."""
    usable = [k for k in knobs if k.role and not k.unavailable]
    by_role = {k.role: k for k in sorted(usable, key=lambda k: not k.builtin)}
    out: list[Candidate] = []
    for finding in found:
        for change in finding.changes:
            knob = by_role.get(change.role)
            value = concrete_value(change, knob, observation) if knob else None
            if knob is not None and value is not None:
                out.append(
                    Candidate(
                        ((knob.name, value),),
                        ((knob.name, knob.value),),
                        finding.id,
                        finding.gain if finding.expected_gain else None,
                    )
                )
    return out


def concrete_value(
    change: Change, knob: KnobState, observation: Observation | None
) -> KnobValue | None:
    """The value ``knob`` should take for ``change``; None when it cannot carry it."""
    target = change.value
    if knob.kind == "bool":
        return target if isinstance(target, bool) else None
    if knob.kind == "choice":
        choices = knob.choices or ()
        if target in choices:
            return target
        if target is True:  # "compile: true" on a choice of modes: the default mode
            return next((c for c in ("on", "default") if c in choices), None)
        # "gpu" is carried by a choice named "gpu-resize", "gpu-augment", ...
        return next((c for c in choices if isinstance(c, str) and c.startswith(f"{target}-")), None)
    if not isinstance(knob.value, int):
        return None
    if target == "double":
        return _doubled(knob.value, knob, observation)
    if isinstance(target, int) and not isinstance(target, bool):
        return _clamped(target, knob)
    return None


def _doubled(value: int, knob: KnobState, observation: Observation | None) -> int | None:
    """Twice the value, while the GPU memory it would take stays under the near-limit line."""
    if observation is not None:
        used, total = observation.gpu.mem_used_bytes, observation.gpu.mem_total_bytes
        if used and total and 2 * used / total >= MEMORY_NEAR_LIMIT:
            return None
    return _clamped(2 * value, knob)


def _clamped(value: int, knob: KnobState) -> int:
    if knob.maximum is not None:
        value = min(value, knob.maximum)
    if knob.minimum is not None:
        value = max(value, knob.minimum)
    return value


def resolve(value: Any, current: Any) -> Any:
    """A --try value as the knob takes it: ``*2`` and ``/2`` scale a number in force."""
    if isinstance(value, str) and value[:1] in "*/" and isinstance(current, int):
        factor = float(value[1:])
        scaled = current * factor if value[0] == "*" else current / factor
        return max(1, round(scaled))
    return value


def parse_settings(text: str) -> tuple[tuple[str, str], ...]:
    """``"num_workers=16;pin_memory=true"`` -> (("num_workers", "16"), ("pin_memory", "true")).
    A number may be relative to the value in force: ``batch_size=/2``, ``num_workers=*2``."""
    settings = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"{part!r}: expected knob=value")
        settings.append((name.strip(), value.strip()))
    if not settings:
        raise ValueError(f"{text!r}: expected knob=value[;knob=value]")
    return tuple(settings)
