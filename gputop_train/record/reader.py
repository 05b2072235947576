"""Reading a recording back: tolerant of a torn last line or a corrupt one, never fatal."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import events
from ..session.model import Session
from .recorder import FORMAT_VERSION


class UnreadableRecording(ValueError):
    """Not a gputop-train recording (or a newer format than this version reads)."""


@dataclass
class Recording:
    path: Path
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    skipped_lines: list[int] = field(default_factory=list)  # 1-based numbers of bad lines

    skipped_events: int = 0  # events that made no sense, counted by the replays

    @property
    def started_at(self) -> float:
        started = self.meta.get("started_at")
        return (
            float(started)
            if isinstance(started, (int, float)) and _finite(started)
            else (float(self.meta["t"]))
        )

    @functools.cached_property
    def ended_at(self) -> float:
        """The last event's time (kept: the replay's status line asks at every refresh)."""
        return max((e["t"] for e in self.events), default=self.started_at)


def read(path: Path) -> Recording:
    """Parse a JSONL recording; bad lines are skipped and their numbers kept for a warning."""
    meta: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    skipped: list[int] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                event = None
            if not isinstance(event, dict) or not _finite(event.get("t")):
                skipped.append(number)
                continue
            if event.get("kind") == "meta" and meta is None:
                meta = event
            else:
                events.append(event)
    if meta is None:
        raise UnreadableRecording(f"{path}: no gputop-train header line (is it a recording?)")
    version = meta.get("format", 0)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UnreadableRecording(
            f"{path}: format {meta.get('format')} is newer than this gputop-train reads "
            f"({FORMAT_VERSION}); upgrade gputop-train"
        )
    events.sort(key=lambda e: e["t"])
    return Recording(path, meta, events, skipped)


class ReplayClock:
    """The session's clock during a replay: wherever the cursor is."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def new_session(recording: Recording) -> tuple[Session, ReplayClock]:
    clock = ReplayClock(recording.started_at)
    session = Session(
        command=tuple(recording.meta.get("command") or ()),
        clock=clock,
        started_at=recording.started_at,
    )
    session.cpu_count = recording.meta.get("cpu_count")
    return session, clock


def apply(session: Session, event: dict[str, Any]) -> bool:
    """Feed one recorded event to a session, as the live monitor did; False for one that makes
    no sense (an unknown kind, a field of the wrong type: skipped). Informational events
    (phases, findings) are skipped too: the session derives those again."""
    try:
        item = events.decode(event)
    except events.BadEvent:
        return False
    if item.informational:
        return True
    try:
        session.apply(item)
    except Exception:  # a corrupt event the checks let through: skipped, counted; never fatal
        return False
    return True


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def replay_all(recording: Recording) -> Session:
    """The session as it stood at the end of the recording."""
    session, clock = new_session(recording)
    recording.skipped_events = 0
    for event in recording.events:
        clock.t = event["t"]
        if not apply(session, event):
            recording.skipped_events += 1
    clock.t = recording.ended_at
    return session
