"""What a rule returns: a ``Finding`` and the knob ``Change``s it proposes. Its own module so
that every rule family, the registry, the autopilot and the views share one definition and
none of them has to import a family to name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Change:
    """What a knob of ``role`` should become (docs/knobs.md lists the roles). ``value`` is
    the target; for a number it is sized by the evidence (workers toward the idle cores)."""

    role: str
    value: Any


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    evidence: tuple[str, ...]  # each with its number and source
    action: str
    expected_gain: str | None
    confidence: float  # 0..1
    gain: float  # estimated speed-up factor, for ranking
    changes: tuple[Change, ...] = ()  # best first; empty: no knob can carry the action
    rules_out: tuple[str, ...] = field(default=())  # roles the evidence says will not help
    rank: int | None = None  # the rank it names (a straggler), for a per-rank alert or panel
    ranks: tuple[int, ...] = ()  # every rank it names, where several are (a stall); rank first

    @property
    def score(self) -> float:
        return self.gain * self.confidence
