"""Reading a recording back: tolerant of a torn last line or a corrupt one, never fatal."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import stat
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import events
from ..samples import GpuProcess, GpuSample
from ..session.model import Session
from ..wire import RECORDED_STEPS, shown
from .files import describe_os_error
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
    skipped_figures: int = 0  # non-finite or absurd numbers read as N/A (``SaneDecoder``)

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
    """Parse a JSONL recording; bad lines are skipped and their numbers kept for a warning.
    Only a regular file is read (a FIFO would hang, /dev/zero never end), and a line is read
    at most ``MAX_LINE_BYTES`` at a time: memory follows the events, not a line's length."""
    _check_regular(path)
    meta: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    skipped: list[int] = []
    decoder = SaneDecoder()
    with path.open("rb") as handle:
        for number, line in enumerate(_bounded_lines(handle), start=1):
            try:
                event = decoder.event(line)[0] if line is not None else None
            except (ValueError, RecursionError):
                event = None
            if not isinstance(event, dict) or not _plausible_time(event.get("t")):
                skipped.append(number)
                continue
            if event.get("kind") == "meta" and meta is None:
                meta = event
            else:
                events.append(event)
    if meta is None:
        raise UnreadableRecording(f"{path}: no gputop-train header line (is it a recording?)")
    version = meta.get("format", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise UnreadableRecording(
            f"{path}: its header's format ({shown(version)}) is not a version number: "
            "the file is damaged or not a gputop-train recording"
        )
    if version > FORMAT_VERSION:
        raise UnreadableRecording(
            f"{path}: format {version} is newer than this gputop-train reads "
            f"({FORMAT_VERSION}); upgrade gputop-train"
        )
    events.sort(key=lambda e: e["t"])
    return Recording(path, meta, events, skipped, skipped_figures=decoder.absurd)


# No figure a recording holds comes near this: the largest are a step's FLOPs (6 x 1e12
# parameters x 1e7 tokens = 6e19) and bytes (a node's memory, ~1e13). A mean of a million
# figures under it stays finite, where one 1e308 overflowed ``statistics.fmean`` (issue 46).
MAX_FIGURE = 1e21
_MAX_DIGITS = len(str(int(MAX_FIGURE)))


class SaneDecoder(json.JSONDecoder):
    """JSON whose non-finite numbers (Python's json reads NaN and Infinity) and numbers past
    ``MAX_FIGURE`` are read as null (N/A) and counted in ``absurd``. The checks run as each
    number is parsed: a regular expression over every line cost 3 times the parse itself
    (a 24 MB recording, dev box, 2026-12-05); these hooks cost about a third more."""

    def __init__(self) -> None:
        super().__init__(parse_float=self._float, parse_int=self._int,
                         parse_constant=self._constant)  # fmt: skip
        self.absurd = 0

    def _float(self, text: str) -> float | None:
        value = float(text)
        if -MAX_FIGURE <= value <= MAX_FIGURE:  # False for nan
            return value
        self.absurd += 1
        return None

    def _int(self, text: str) -> int | None:
        if len(text) < _MAX_DIGITS:  # nearly every int, at the cost of one len()
            return int(text)
        value = int(text)  # ValueError past 4300 digits: a damaged line
        if -MAX_FIGURE <= value <= MAX_FIGURE:
            return value
        self.absurd += 1
        return None

    def _constant(self, _text: str) -> None:
        self.absurd += 1

    def event(self, line: str) -> tuple[Any, int]:
        """One line parsed, and how many of its figures were read as N/A: those above, and a
        GPU's percentages outside 0-100. ValueError where it is not JSON."""
        before = self.absurd
        event = self.decode(line)
        if isinstance(event, dict) and event.get("kind") == "gpu":
            self.absurd += _drop_absurd_shares(event.get("samples"))
        return event, self.absurd - before


def _drop_absurd_shares(samples: object) -> int:
    """A GPU's (and its processes') percentages outside 0-100 as N/A; how many there were."""
    dropped = 0
    for sample in samples if isinstance(samples, list) else ():
        if not isinstance(sample, dict):
            continue
        processes = sample.get("processes")
        places = [(sample, _GPU_SHARES)]
        places += [(p, _PROCESS_SHARES) for p in processes or () if isinstance(p, dict)]
        for place, keys in places:
            for key in keys:
                value = place.get(key)
                if value is not None and _finite(value) and not 0 <= value <= 100:
                    place[key] = None
                    dropped += 1
    return dropped


_GPU_SHARES = tuple(f.name for f in dataclasses.fields(GpuSample) if f.name.endswith("_pct"))
_PROCESS_SHARES = tuple(f.name for f in dataclasses.fields(GpuProcess) if f.name.endswith("_pct"))


def step_rows(path: Path, held: Mapping[int, int]) -> typing.Iterator[events.StepRows]:
    """The lines of step rows in the recording at ``path`` that may hold a step past
    ``held`` (PID -> its last step already taken), in file order: the hook's own among them
    (hook/row_log.py), which a monitor that read the job late never received. A line whose
    first step is held is parsed only if it is that PID's last such line: a PID's rows are
    in step order, so the others hold nothing new (an hour at 200 steps/s in lines of 20
    rows, 77 MB: 0.08 s with every step held, against 3.4 s parsing every line; dev box,
    2026-11-27, a synthetic recording, warm page cache). Other kinds are passed over
    unparsed, a bad line is skipped; OSError where unreadable."""
    _check_regular(path)
    last_held: dict[int, str] = {}  # per PID: its latest line that starts at a held step
    with path.open("rb") as handle:
        for line in _bounded_lines(handle):
            found = _STEPS_HEAD.match(line) if line is not None else None
            if found is None:
                continue
            pid, first = int(found[1]), int(found[2])
            if first <= held.get(pid, 0):
                last_held[pid] = typing.cast(str, line)
                continue
            if pid in last_held:
                yield from _step_rows_of(last_held.pop(pid))
            yield from _step_rows_of(typing.cast(str, line))
    for line in last_held.values():
        yield from _step_rows_of(line)


# How the recorder and the hook begin a line of step rows (json.dumps's separators): its PID
# and its first row's step.
_STEPS_HEAD = re.compile(
    rf'\{{"kind": "{RECORDED_STEPS}", "t": [^,]+, "pid": (\d+), "rows": \[\[(\d+),'
)


def _step_rows_of(line: str) -> typing.Iterator[events.StepRows]:
    try:
        item = events.decode(SaneDecoder().event(line)[0])
    except (ValueError, RecursionError, events.BadEvent):
        return
    if isinstance(item, events.StepRows):
        yield item


# No recorded event comes near this: the largest is a backlog of 512 step rows (~60 KB).
MAX_LINE_BYTES = 16 * 1024 * 1024
# Unix time of 2100-01-01: a `t` past it (1e308 printed a 300-digit duration) is damage.
_LATEST_T = 4_102_444_800.0


def _check_regular(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise  # the caller says where recordings are
    except OSError as error:
        raise UnreadableRecording(describe_os_error(error, path)) from error
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a pipe or device)"
        raise UnreadableRecording(f"{path} is {kind}: a recording is a .jsonl file")


def _bounded_lines(handle: typing.BinaryIO) -> typing.Iterator[str | None]:
    """Each line of ``handle`` as text, or None for one longer than ``MAX_LINE_BYTES`` (its
    rest is read past in pieces, never held)."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:
                rest = handle.readline(MAX_LINE_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line.decode("utf-8", errors="replace")


def _plausible_time(value: object) -> bool:
    return _finite(value) and 0 <= value <= _LATEST_T  # type: ignore[operator]


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
    cores = recording.meta.get("cpu_count")
    session.apply(events.CoresCounted(cores if isinstance(cores, int) else None), record=False)
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


def replay_all(
    recording: Recording, listener: Callable[[events.Event], None] | None = None
) -> Session:
    """The session as it stood at the end of the recording; ``listener`` is told each decoded
    event as the session takes it (the report keeps its step rows so, decoding each once)."""
    session, clock = new_session(recording)
    session.listener = listener
    recording.skipped_events = 0
    for event in recording.events:
        clock.t = event["t"]
        if not apply(session, event):
            recording.skipped_events += 1
    clock.t = recording.ended_at
    session.listener = None
    return session
