"""A recording loaded once for ``report``, ``compare`` and ``check``.

The figures are the summary's (one replay through the same code as ``gputop-train summary``).
The plots want every step, and the session keeps a bounded window (``session.model.MAX_STEPS``),
so the replay's decoded step rows and GPU samples are kept as they pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import events
from ..record.reader import Recording, read, replay_all
from ..record.summary import summarize
from ..samples import GpuSample
from ..session.model import Session
from ..session.steps import Step


@dataclass(frozen=True)
class PhaseMark:
    """Where a phase began on the run's clock, and what it was."""

    index: int
    change: str
    first_step: int
    t: float  # seconds since the session started
    speedup: float | None  # samples/s against phase 1's (the phase table's)
    failed: str | None


@dataclass
class Run:
    """One recorded session, with the summary's figures and the whole run's raw series."""

    path: Path
    recording: Recording
    session: Session
    summary: dict[str, Any]
    steps: list[Step]  # every step of every process, time order
    gpu_ticks: list[tuple[GpuSample, ...]]
    ranks: dict[int, int | None]  # pid -> rank (None: not a torchrun rank)
    torch_versions: tuple[str, ...]
    primary_pid: int | None
    phases: list[PhaseMark]

    @property
    def started_at(self) -> float:
        return self.recording.started_at

    def label(self, pid: int) -> str:
        rank = self.ranks.get(pid)
        return f"rank {rank}" if rank is not None else f"PID {pid}"


def load(path: Path) -> Run:
    """Read and replay ``path``; ``UnreadableRecording`` / ``OSError`` say why it cannot be.
    The replay's own decoded events are kept as they pass (the session's listener), so each
    line is decoded once."""
    recording = read(path)
    kept = _Kept()
    session = replay_all(recording, kept.take)
    summary = summarize(session, recording.meta)
    steps = _whole_run(session.steps(), kept.rows)
    steps.sort(key=lambda s: s.t)
    primary = session.primary_pid()
    return Run(
        path=path,
        recording=recording,
        session=session,
        summary=summary,
        steps=steps,
        gpu_ticks=kept.ticks,
        ranks=kept.ranks,
        torch_versions=tuple(sorted(kept.torch_versions)),
        primary_pid=primary,
        phases=_phase_marks(summary, steps, primary, recording.started_at),
    )


class _Kept:
    """What the plots need of the events a replay applies."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, tuple[Any, ...]]] = []  # each StepRows' pid and rows
        self.ticks: list[tuple[GpuSample, ...]] = []
        self.ranks: dict[int, int | None] = {}
        self.torch_versions: set[str] = set()

    def take(self, item: events.Event) -> None:
        if isinstance(item, events.StepRows):
            self.rows.append((item.pid, item.rows))
        elif isinstance(item, events.GpuSampled) and item.samples:
            self.ticks.append(item.samples)
        elif isinstance(item, events.ProcessHello):
            self.ranks[item.pid] = item.rank
            if item.torch:
                self.torch_versions.add(item.torch)


def _whole_run(kept: list[Step], rows: list[tuple[int, tuple[Any, ...]]]) -> list[Step]:
    """Every step of the run: the session's (it built them from these rows) and, where its
    bounded buffer dropped the oldest, those rebuilt from the rows before its first, skipping
    a re-sent backlog as the session does (``Session._on_steps``)."""
    if not kept:
        return []
    first = kept[0]
    older: list[Step] = []
    last: dict[int, int] = {}
    for pid, batch in rows:
        for row in batch:
            step = Step.from_row(pid, row) if isinstance(row, list) else None
            if step == first:
                return older + kept
            if step is not None and step.step > last.get(pid, 0):
                last[pid] = step.step
                older.append(step)
    return older + kept


def _phase_marks(
    summary: dict[str, Any], steps: list[Step], primary: int | None, started_at: float
) -> list[PhaseMark]:
    """Each phase of the summary's table, placed where its first step began (as the summary's
    SVG chart places it)."""
    starts: dict[int, float] = {}
    for step in steps:
        if (primary is None or step.pid == primary) and step.step not in starts:
            starts[step.step] = step.t - (step.step_ms or 0.0) / 1000.0
    marks = []
    for row in summary["phases"]:
        first = row["first_step"]
        t = starts.get(first)
        if t is None:  # a phase whose first step is not in the recording: its next known one
            later = [s for n, s in starts.items() if n >= first]
            t = min(later) if later else None
        marks.append(
            PhaseMark(
                index=row["phase"],
                change=row["change"],
                first_step=first,
                t=(t - started_at) if t is not None else 0.0,
                speedup=row["speedup"],
                failed=row["failed"],
            )
        )
    return marks
