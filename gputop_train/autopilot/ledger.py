"""What the autopilot leaves a person: the edits no knob can make, and one command line that
replays the kept changes (docs/autopilot.md, "The ledger")."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..advise.rules import Finding

# The hook declares its built-in knobs after the first optimizer step (hook/agent.py's
# BUILTIN_KNOBS_STEP = 1, after that step's scheduled changes): a replayed schedule applies
# after the step past it, when every built-in knob exists.
REPLAY_STEP = 2
# A place in the script the hook names in a finding's evidence: "train.py:212 .item() (x3)".
_SCRIPT_LINE = re.compile(r"[\w./-]+\.py:\d+")


@dataclass(frozen=True)
class Edit:
    """A finding no knob can carry: the change a person makes in the script."""

    finding: str  # its id: "model.sdpa"
    title: str
    action: str  # the exact change, as the advisor says it
    expected_gain: str | None  # "up to 1.6x"
    gain: float  # the advisor's estimate, for ranking
    lines: tuple[str, ...]  # the script's own lines where the hook knows them


def edit_of(finding: Finding) -> Edit:
    lines = tuple(e for e in finding.evidence if _SCRIPT_LINE.search(e))
    f = finding
    return Edit(f.id, f.title, f.action, f.expected_gain, f.gain, lines)


def end_settings(
    initial: dict[str, object], kept: Iterable[Sequence[tuple[str, object]]]
) -> list[tuple[str, object]]:
    """The kept changes' settings that differ from the start, in the order first changed."""
    end: dict[str, object] = {}
    for settings in kept:
        for name, value in settings:
            end[name] = value
    return [(name, value) for name, value in end.items() if initial.get(name) != value]


def replay_command(command: Sequence[str], settings: Sequence[tuple[str, object]]) -> str | None:
    """``gputop-train --schedule "2:num_workers=16;autocast=bf16" -- python train.py``: the
    job from its start with the kept changes, applied before its third step; None with
    nothing kept."""
    if not settings or not command:
        return None
    schedule = ";".join(f"{name}={setting_text(value)}" for name, value in settings)
    return shlex.join(["gputop-train", "--schedule", f"{REPLAY_STEP}:{schedule}", "--", *command])


def setting_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
