"""Reading a recording back: tolerant of a torn last line or a corrupt one, never fatal."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..samples import STACK_WINDOW_S, GpuProcess, GpuSample, ProcSample, StackShares
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

    @property
    def started_at(self) -> float:
        return float(self.meta.get("started_at") or self.meta["t"])

    @property
    def ended_at(self) -> float:
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
                if not isinstance(event, dict) or not isinstance(event.get("t"), (int, float)):
                    raise ValueError("not an event")
            except ValueError:
                skipped.append(number)
                continue
            if event.get("kind") == "meta" and meta is None:
                meta = event
            else:
                events.append(event)
    if meta is None:
        raise UnreadableRecording(f"{path}: no gputop-train header line (is it a recording?)")
    if meta.get("format", 0) > FORMAT_VERSION:
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


def apply(session: Session, event: dict[str, Any]) -> None:
    """Feed one recorded event to a session, as the live monitor did. Bad events are skipped,
    and so are the informational ones (phases, findings): the session derives those again."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        _APPLY[event["kind"]](session, event)


def _gpu_sample(data: dict[str, Any]) -> GpuSample:
    processes = tuple(GpuProcess(**p) for p in data.get("processes") or ())
    throttle = data.get("throttle")
    return GpuSample(
        **{
            **data,
            "processes": processes,
            "throttle": tuple(throttle) if throttle is not None else None,
        }
    )


_APPLY = {
    "gpus": lambda s, e: s.set_gpus(e["names"], e.get("error"), e.get("driver")),
    "hello": lambda s, e: s.process_hello(e["pid"], e["frame"]),
    "disconnected": lambda s, e: s.process_disconnected(e["pid"]),
    "knobs": lambda s, e: s.set_knobs(e["pid"], e["knobs"]),
    "knob_requested": lambda s, e: s.knob_requested(e["name"], e["value"]),
    "knob_outcome": lambda s, e: s.knob_outcome(e["pid"], e["frame"]),
    "steps": lambda s, e: s.add_step_rows(e["pid"], e["rows"]),
    "gpu": lambda s, e: s.add_gpu_samples(tuple(_gpu_sample(g) for g in e["samples"])),
    "procs": lambda s, e: s.set_processes(
        tuple(ProcSample(**p) for p in e["samples"]), e.get("system_cpu_pct")
    ),
    "fact": lambda s, e: s.add_fact(e["pid"], e["frame"]),
    "notice": lambda s, e: s.add_notice(e["text"]),
    "stacks": lambda s, e: s.set_stack_shares(
        StackShares(e["thread"], e["samples"], e["shares"], e.get("window_s", STACK_WINDOW_S))
    ),
    "autopilot": lambda s, e: s.set_autopilot(e["status"]),
    "reading": lambda s, e: s.add_reading(e["source"], e["value"]),
    "dropped": lambda s, e: s.count_dropped(e["frames"]),
    "job_ended": lambda s, e: s.job_ended(e["exit_code"], tuple(e.get("stderr_tail") or ())),
}


def replay_all(recording: Recording) -> Session:
    """The session as it stood at the end of the recording."""
    session, clock = new_session(recording)
    for event in recording.events:
        clock.t = event["t"]
        apply(session, event)
    clock.t = recording.ended_at
    return session
