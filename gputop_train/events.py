"""What happens to a session: one frozen dataclass per event, and the one registry that names
them in a recording.

An event is the session's only input (``Session.apply``): the samplers, the hook client, the
autopilot, the CLI and the replay all build one. The recorder writes each as a line
``{"kind": KIND, "t": ..., **payload()}`` and the reader reads it back with ``decode``, which
checks every field against its declared type, so a corrupt line is refused (BadEvent) and
never reaches the session. Adding a fact: one class here, decorated with ``@event("kind")``,
and one handler in session/model.py (docs/architecture.md, "Add a fact").

This module sits below the samplers (collect/ builds sampler events) and above the wire and
the sample types: it imports nothing else of gputop-train.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeGuard, TypeVar

from . import wire
from .samples import STACK_WINDOW_S, GpuProcess, GpuSample, ProcSample, StackShares


class BadEvent(ValueError):
    """A recorded event whose kind is unknown or whose fields are not of their types."""


@dataclass(frozen=True)
class Event:
    """One thing that happened to a session. ``kind`` names it in a recording."""

    kind: ClassVar[str] = ""
    # Recorded for the reader, never applied on replay: the session derives it again.
    informational: ClassVar[bool] = False

    def payload(self) -> dict[str, Any]:
        """The recorded fields (JSON values; tuples are written as lists)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_frame(cls, pid: int, frame: wire.Frame) -> Event:
        """This event from a hook's frame: ``pid`` (the socket's) and the frame's fields of the
        same names. Override where the names differ."""
        names = [f.name for f in fields(cls) if f.name != "pid"]
        return cls(pid=pid, **{name: getattr(frame, name) for name in names})  # type: ignore[call-arg]

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> Event:
        """The event a recorded line holds, every field checked (BadEvent if one is wrong).
        Fields this version does not know are ignored; a missing field takes its default."""
        hints = wire.field_types(cls)
        values = {}
        for f in fields(cls):
            if f.name in data:
                values[f.name] = wire.checked(data[f.name], hints[f.name], f.name)
        try:
            return cls(**values)
        except TypeError as error:  # a required field missing
            raise BadEvent(f"{cls.kind}: {error}") from None


EVENTS: dict[str, type[Event]] = {}  # kind -> class: the recording's schema, in one place
# Frame class -> the event a hook's frame of that class becomes: the hook client applies it,
# with the socket's PID, for every frame it has no handler of its own for (the facts among them).
FROM_FRAME: dict[type[wire.Frame], type[Event]] = {}
E = TypeVar("E", bound=type[Event])


def event(
    kind: str,
    informational: bool = False,
    frame: type[wire.Frame] | tuple[type[wire.Frame], ...] = (),
) -> Callable[[E], E]:
    """Register an event class under ``kind`` (its name in a recording; never reuse one);
    with ``frame``, the wire frame class (or classes) that become this event
    (``from_frame``): the one route of a hook's frame into the session."""
    frames = frame if isinstance(frame, tuple) else (frame,)

    def register(cls: E) -> E:
        if kind in EVENTS or any(f in FROM_FRAME for f in frames):
            raise ValueError(f"event kind {kind!r} or its frame registered twice")
        cls.kind, cls.informational = kind, informational
        EVENTS[kind] = cls
        FROM_FRAME.update(dict.fromkeys(frames, cls))
        return cls

    return register


def from_frame(pid: int, frame: wire.Frame) -> Event | None:
    """The event a hook's frame becomes (``FROM_FRAME``), or None for a frame no event takes."""
    cls = FROM_FRAME.get(type(frame))
    return cls.from_frame(pid, frame) if cls is not None else None


def encode(item: Event) -> tuple[str, dict[str, Any]]:
    """The kind and payload a recorder writes for ``item``."""
    return item.kind, item.payload()


def decode(line: dict[str, Any]) -> Event:
    """The event of one recorded line (its ``kind`` and fields; ``t`` is the recorder's);
    BadEvent for an unknown kind or a field of the wrong type."""
    cls = EVENTS.get(line.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise BadEvent(f"unknown event kind {str(line.get('kind'))[:40]!r}")
    try:
        return cls.from_payload(line)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise BadEvent(f"{cls.kind}: {error}") from None


# -- the events ---------------------------------------------------------------------------


@event("gpus")
@dataclass(frozen=True)
class GpusFound(Event):
    """The GPUs NVML found (names, and who each is: UUID and PCI bus id), or why it cannot
    read them (error)."""

    names: tuple[str | None, ...]
    error: str | None = None
    driver: str | None = None
    uuids: tuple[str | None, ...] = ()
    pci_bus_ids: tuple[str | None, ...] = ()
    # CUDA_VISIBLE_DEVICES as the monitor runs (a launched job inherits it): the GPUs
    # assumed to be the job's until it touches one (session/job_gpus.py); None: unset.
    visible_devices: str | None = None


@event("hello")
@dataclass(frozen=True)
class ProcessHello(Event):
    """A hooked process said who it is (its hello frame)."""

    pid: int
    argv: tuple[str, ...] = ()
    rank: int | None = None
    local_rank: int | None = None
    torch: str | None = None
    host: str | None = None
    world_size: int | None = None  # the job's ranks (WORLD_SIZE), on every node

    @classmethod
    def from_frame(cls, pid: int, frame: wire.Frame) -> ProcessHello:
        """The one translation of a hello, live (monitor/hook_client.py) and replayed (``of``)."""
        if not isinstance(frame, wire.Hello):
            raise TypeError(f"a hello event from a {frame.TYPE} frame")
        return cls(
            pid=pid,
            argv=tuple(frame.argv or ()),
            rank=frame.rank,
            local_rank=frame.local_rank,
            torch=frame.torch,
            host=frame.host,
            world_size=frame.world_size,
        )

    def payload(self) -> dict[str, Any]:
        frame = {name: getattr(self, name) for name in _HELLO_FIELDS}
        return {"pid": self.pid, "frame": frame}

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> ProcessHello:
        return cls.of(*_pid_and_frame(data))

    @classmethod
    def of(cls, pid: int, frame: dict[str, Any]) -> ProcessHello:
        """From a hello frame's fields (a recording holds them); a field of the wrong type is
        left unknown, as the session always did (``wire.Frame.decode_known``)."""
        return cls.from_frame(pid, wire.Hello.decode_known({**frame, "pid": pid}))


_HELLO_FIELDS = ("argv", "rank", "local_rank", "torch", "host", "world_size")


@event("disconnected")
@dataclass(frozen=True)
class ProcessGone(Event):
    """The connection to a hooked process closed."""

    pid: int


@event("knobs", frame=wire.Knobs)
@dataclass(frozen=True)
class KnobsDeclared(Event):
    """The knobs a process declared (its hook's Knob.describe() each): its knobs frame, or
    its hello's ``knobs``."""

    pid: int
    knobs: tuple[dict[str, Any], ...]

    @classmethod
    def from_frame(cls, pid: int, frame: wire.Frame) -> KnobsDeclared:
        if not isinstance(frame, wire.Knobs | wire.Hello):
            raise TypeError(f"knobs from a {frame.TYPE} frame")
        return cls(pid, tuple(frame.knobs or ()))


@event("knob_requested")
@dataclass(frozen=True)
class KnobRequested(Event):
    """The user asked for a knob change (it is pending until the hook's outcome)."""

    name: str
    value: Any


@event("knob_outcome")
@dataclass(frozen=True)
class KnobOutcome(Event):
    """A hook's knob_applied frame: the value in force after a change, or why not."""

    pid: int
    name: str
    value: Any  # the value in force; the session ignores one a hook never sends
    ok: bool
    previous: Any = None
    step: int | None = None  # the step after which it applied; None: refused on arrival
    seq: int | None = None  # the hook's count of outcomes: the hello's history overlaps
    error: str | None = None
    t: float | None = None  # when the hook applied it
    reverted: bool = False
    request_id: Any = None

    def payload(self) -> dict[str, Any]:
        frame = {
            "seq": self.seq,
            "id": self.request_id,
            "name": self.name,
            "value": self.value,
            "previous": self.previous,
            "ok": self.ok,
            "error": self.error,
            "step": self.step,
            "reverted": self.reverted,
            "t": self.t,
        }
        return {"pid": self.pid, "frame": frame}

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> KnobOutcome:
        return cls.of(*_pid_and_frame(data))

    @classmethod
    def of(cls, pid: int, frame: dict[str, Any]) -> KnobOutcome:
        """From a knob_applied frame's fields (a recording holds whole frames): a field of the
        wrong type is left unknown; TypeError for one without a knob's name."""
        try:
            applied = wire.KnobApplied.decode_known({"value": None, "ok": False, **frame})
        except wire.MalformedFrame as error:
            raise TypeError(str(error)) from None
        return cls.from_frame(pid, applied)

    @classmethod
    def from_frame(cls, pid: int, frame: wire.Frame) -> KnobOutcome:
        """The one translation of a knob_applied frame, live and replayed (``of``)."""
        if not isinstance(frame, wire.KnobApplied):
            raise TypeError(f"a knob outcome from a {frame.TYPE} frame")
        if not isinstance(frame.name, str):
            raise TypeError("a knob outcome names no knob")
        return cls(
            pid=pid,
            name=frame.name,
            value=frame.value,
            ok=frame.ok,
            previous=frame.previous,
            step=frame.step,
            seq=frame.seq,
            error=str(frame.error) if frame.error else None,
            t=frame.t,
            reverted=frame.reverted,
            request_id=frame.id,
        )


@event("phase", informational=True)
@dataclass(frozen=True)
class PhaseOpened(Event):
    """A phase began or changed (told by the session for the record; replay derives it)."""

    phase: dict[str, Any]


@event("steps")
@dataclass(frozen=True)
class StepRows(Event):
    """A batch of step rows from a hook (columns: wire.STEP_FIELDS); bad rows are counted."""

    pid: int
    rows: tuple[Any, ...]


@event("gpu")
@dataclass(frozen=True)
class GpuSampled(Event):
    """One NVML sample of every GPU."""

    samples: tuple[GpuSample, ...]

    def payload(self) -> dict[str, Any]:
        return {"samples": [_gpu_record(s) for s in self.samples]}

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> GpuSampled:
        return cls(tuple(_gpu_sample(g) for g in wire.checked(data["samples"], list, "samples")))


@event("procs")
@dataclass(frozen=True)
class ProcsSampled(Event):
    """One sample of the job's processes, the machine's busy share of all cores, and the
    cores the job may use (its affinity and cgroup CPU quota; None: unknown)."""

    samples: tuple[ProcSample, ...]
    system_cpu_pct: float | None = None
    usable_cores: float | None = None

    def payload(self) -> dict[str, Any]:  # flat: no asdict() copy
        return {
            "samples": [vars(p) for p in self.samples],
            "system_cpu_pct": self.system_cpu_pct,
            "usable_cores": self.usable_cores,
        }

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> ProcsSampled:
        samples = wire.checked(data["samples"], list, "samples")
        cpu, room = data.get("system_cpu_pct"), data.get("usable_cores")
        return cls(
            tuple(_sample(ProcSample, p) for p in samples),
            float(cpu) if _finite(cpu) else None,
            float(room) if _finite(room) else None,
        )


# The frames that carry a fact about the job, each one ``FactSeen``; the session keeps them, by
# class, to find the one in force at any time (session/observe.py ``fact_at``).
FACT_FRAMES: tuple[type[wire.Frame], ...] = (
    wire.Loader,
    wire.Syncs,
    wire.Flops,
    wire.Model,
    wire.Workload,
    wire.StepParts,
    wire.MemoryAudit,
)


@event("fact", frame=FACT_FRAMES)
@dataclass(frozen=True)
class FactSeen(Event):
    """A fact frame (FACT_FRAMES), typed: ``wire.decode_frame`` checked every field, live
    and replayed alike; recorded as the frame's fields with its ``type``."""

    pid: int
    frame: wire.Frame

    @classmethod
    def from_frame(cls, pid: int, frame: wire.Frame) -> FactSeen:
        if not isinstance(frame, FACT_FRAMES):
            raise TypeError(f"{frame.TYPE} is no fact frame")
        return cls(pid, frame)

    def payload(self) -> dict[str, Any]:
        return {"pid": self.pid, "frame": self.frame.fields()}

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> FactSeen:
        return cls.of(*_pid_and_frame(data))

    @classmethod
    def of(cls, pid: int, frame: dict[str, Any]) -> FactSeen:
        """From a fact frame's fields with its ``type`` (a recording holds them); TypeError
        for an unknown type or a field of the wrong type."""
        typed = wire.decode_frame(frame)
        if typed is None:
            raise TypeError(f"not a fact frame: {wire.shown(frame.get('type'))}")
        return cls.from_frame(pid, typed)


@event("notice")
@dataclass(frozen=True)
class NoticeAdded(Event):
    """A line for the Log."""

    text: str


@event("refused")
@dataclass(frozen=True)
class HookRefused(Event):
    """A process's hook turned this monitor away (too many monitors, too many new
    connections): said at once, not only in the closing notes."""

    pid: int
    reason: str


@event("stacks")
@dataclass(frozen=True)
class StacksSampled(Event):
    """A window of py-spy samples of the training thread (a job without the hook)."""

    stacks: StackShares

    def payload(self) -> dict[str, Any]:
        return dict(vars(self.stacks))

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> StacksSampled:
        shares = wire.checked(data["shares"], dict, "shares")
        return cls(
            StackShares(
                wire.checked(data["thread"], str, "thread"),
                wire.checked(data["samples"], int, "samples"),
                {str(k): wire.checked(v, float, k) for k, v in shares.items()},
                wire.checked(data.get("window_s", STACK_WINDOW_S), float, "window_s"),
            )
        )


@event("stacks_expected")
@dataclass(frozen=True)
class StacksExpected(Event):
    """A job without the hook is sampled with py-spy: its first window is due ``window_s``
    from now (what the screen says until it comes)."""

    window_s: float


@event("cores")
@dataclass(frozen=True)
class CoresCounted(Event):
    """The machine's logical cores (``os.cpu_count()``; None: unknown), against which the
    idle cores and the room for workers are reckoned. Applied unrecorded: the recording's
    header holds it (``cpu_count``), and the replay applies it from there."""

    count: int | None


@event("autopilot")
@dataclass(frozen=True)
class AutopilotChanged(Event):
    """The autopilot's (or --try's) state and trial table (autopilot/pilot.py PilotStatus as
    a dict); recorded when its state, trials or end change."""

    status: dict[str, Any]


@event("findings", informational=True)
@dataclass(frozen=True)
class FindingsShown(Event):
    """The advisor's findings as shown live (for the record: a replay recomputes them)."""

    findings: tuple[dict[str, Any], ...]


@event("reading")
@dataclass(frozen=True)
class ReadingTaken(Event):
    """The latest sample of a sampler whose data has no place of its own (collect/base.py)."""

    source: str
    value: dict[str, Any]


@event("dropped")
@dataclass(frozen=True)
class FramesDropped(Event):
    """Frames from a hook that could not be read."""

    frames: int


@event("stop")
@dataclass(frozen=True)
class StopAsked(Event):
    """The user asked the job to stop (its exit code is then no failure)."""

    reason: str


@event("job_ended")
@dataclass(frozen=True)
class JobEnded(Event):
    """The job's process exited; ``exit_code`` None when it cannot be known (attached)."""

    exit_code: int | None
    stderr_tail: tuple[str, ...] = ()
    at: float | None = None  # when it exited (Unix s): the drain after it is not the job's


# -- checking recorded values ---------------------------------------------------------------


def _pid_and_frame(data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The ``pid`` and ``frame`` of an event recorded as its frame's fields, each checked."""
    return wire.checked(data["pid"], int, "pid"), wire.checked(data["frame"], dict, "frame")


def _finite(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _sample(cls: Any, data: object) -> Any:
    """A sample dataclass from recorded data, its fields checked against their declared kinds
    (a number where a number goes, a string where a string goes), or TypeError. A field this
    version does not have is left out: a recording from a version that had it (a process's
    thread count, until 2026-11) still plays."""
    if not isinstance(data, dict):
        raise TypeError("not an object")
    kinds = _field_kinds(cls)
    data = {name: value for name, value in data.items() if name in kinds}
    for name, value in data.items():
        if value is None:
            continue
        number, text = kinds[name]
        if number and not _finite(value):
            raise TypeError(f"{name} is not a number")
        if text and not isinstance(value, str):
            raise TypeError(f"{name} is not text")
    return cls(**data)


_KINDS: dict[type, dict[str, tuple[bool, bool]]] = {}


def _field_kinds(cls: type) -> dict[str, tuple[bool, bool]]:
    """Per field of a sample class: must it be a number, must it be text (once per class: a
    hint written out per field and sample was most of a replay's decoding, py-spy, dev box,
    2026-11-27). ``processes`` and ``throttle`` are checked by their own decoders."""
    if cls not in _KINDS:
        kinds = {}
        for name, hint in wire.field_types(cls).items():
            written = "" if name in ("processes", "throttle") else str(hint)
            kinds[name] = ("float" in written or "int" in written, written.startswith("str"))
        _KINDS[cls] = kinds
    return _KINDS[cls]


def _gpu_sample(data: dict[str, Any]) -> GpuSample:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    processes = tuple(_sample(GpuProcess, p) for p in data.get("processes") or ())
    throttle = data.get("throttle")
    return _sample(
        GpuSample,
        {
            **data,
            "processes": processes,
            "throttle": tuple(str(t) for t in throttle) if throttle is not None else None,
        },
    )


def _gpu_record(sample: GpuSample) -> dict[str, Any]:
    """What asdict() returns, without its deep copy: 20 times cheaper, and it runs at every
    GPU sample."""
    return {**vars(sample), "processes": [vars(p) for p in sample.processes]}
