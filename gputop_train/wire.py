"""The wire between the hook (inside training) and the monitor: the only contract both share.

Standard library only: the hook imports this module inside the user's training process,
where none of gputop-train's own dependencies may be installed. docs/protocol.md describes
every frame; change both together.

Frames are newline-delimited JSON objects, each with ``"v"`` (protocol version) and
``"type"``. The hook listens on a Unix socket named after its PID in a private per-user
directory; the monitor connects.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import stat
import tempfile
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypedDict, TypeVar, Union

VERSION = 1

# Hook -> monitor.
HELLO = "hello"  # once per connection: who the process is
STEPS = "steps"  # a batch of step rows, columns named by STEP_FIELDS
NOTICE = "notice"  # a human-readable event ("hook disabled: ...")
BYE = "bye"  # the process is exiting; no more frames follow
KNOBS = "knobs"  # the knobs the script declared (also in hello)
KNOB_APPLIED = "knob_applied"  # the outcome of a change: the value in force, or why not
# The request id of a --schedule change ("schedule@STEP", hook/knobs.py), echoed in its outcome.
SCHEDULE_REQUEST = "schedule@"
SYNCS = "syncs"  # a sync scan of one step: count and call sites
FLOPS = "flops"  # FLOPs of one whole step, counted once
LOADER = "loader"  # facts about the DataLoader and its batches, once per epoch it feeds
MODEL = "model"  # facts about the forward pass: CUDA, autocast, parameter dtype, TF32, layout
WORKLOAD = "workload"  # the step's census, analytic FLOPs, kernel profile, matmul peak
WAITING = "waiting"  # answer to WHERE_WAITING: the collective the training thread is in now
STEP_PARTS = "step_parts"  # the model whose forwards are timed and counted, or why none is
MEMORY_AUDIT = "memory_audit"  # parameters, gradients, optimizer state, allocator peaks
ROWS_UNRECORDED = "rows_unrecorded"  # the hook stopped appending its rows: the monitor records

# Monitor -> hook.
SET_KNOB = "set_knob"  # change one knob at the next step boundary
SCAN_SYNCS = "scan_syncs"  # run a sync scan on the next step
WHERE_WAITING = "where_waiting"  # answered at once (listener thread) by a WAITING frame
AUTOPILOT_DONE = "autopilot_done"  # the autopilot has finished: hook.autopilot_active() is False
KEEP_TRIALS = "keep_trials"  # this monitor's trials of these knobs stay, should it leave
ALIVE = "alive"  # the monitor is there (every few seconds): an idle one gives way to a new one

# How often the hook sends what is new (steps, facts, notices): one frame per redraw of the
# TUI is all a screen can show; the figures are sums of rows, so a batch loses nothing. The
# TUI's default --refresh is this period.
SEND_PERIOD_S = 0.5

# How a rank's refusal of a change meant for a step it is already past begins (a knob
# outcome's error, the step follows): the monitor may send it again for a later step.
LATE_FOR_STEP = "arrived after step"
# How the hook's other refusals of a change begin (docs/protocol.md, docs/security.md): a step
# further ahead than it holds changes for, too many changes waiting, and a change (or a trial)
# whose monitor left before it was due.
TOO_FAR_AHEAD = "too far ahead: step"
TOO_MANY_WAITING = "too many changes waiting"
MONITOR_LEFT = "its monitor left"

# -- the environment the launcher gives the job ---------------------------------------------
# hook/boot/sitecustomize.py reads HOOK_ENV and PKG_ROOT_ENV by their values: it runs before
# this package can be imported.

HOOK_ENV = "GPUTOP_TRAIN_HOOK"  # "1": arm the hook in every Python process that imports torch
PKG_ROOT_ENV = "GPUTOP_TRAIN_PKG_ROOT"  # where the monitor's gputop_train package lives
MONITOR_PID_ENV = "GPUTOP_TRAIN_MONITOR_PID"  # an exiting job waits briefly for this monitor
# The launcher hands a --schedule to the job here (JSON list of {"step": N, "set": {...}}),
# so that every entry applies at exactly its step, however late the monitor connects.
SCHEDULE_ENV = "GPUTOP_TRAIN_SCHEDULE"
RUNTIME_DIR_ENV = "GPUTOP_TRAIN_RUNTIME_DIR"  # where the sockets live (docs/security.md)
# "1" when the launcher runs the job under --autopilot: a script may train on until it is
# done (hook.autopilot_active(), demos/resnet.py).
AUTOPILOT_ENV = "GPUTOP_TRAIN_AUTOPILOT"
# The session's recording, where the hook appends its own step rows as it sends them: the
# recording keeps up with the job whether or not the monitor gets the CPU (docs/recording.md).
RECORDING_ENV = "GPUTOP_TRAIN_RECORDING"
# The variables only the launcher sets: it clears each one it does not set (a stale one from
# the user's shell is never passed on), and the hook takes a schedule or a recording only from
# a launcher that is its ancestor (docs/security.md).
LAUNCHER_ENV = (
    HOOK_ENV, PKG_ROOT_ENV, MONITOR_PID_ENV, SCHEDULE_ENV, AUTOPILOT_ENV, RECORDING_ENV,
)  # fmt: skip
# The kind of a recording's line of step rows (events.StepRows): the hook writes it too.
RECORDED_STEPS = "steps"


def recorded_steps_line(pid: int, t: float, encoded_rows: list[bytes]) -> bytes:
    """A recording's line of step rows, as the recorder writes events.StepRows (its kind,
    the time, the PID, the rows encoded once by ``encode_row``; json.dumps's separators)."""
    head = f'{{"kind": "{RECORDED_STEPS}", "t": {t!r}, "pid": {int(pid)}, "rows": ['.encode()
    return head + b", ".join(encoded_rows) + b"]}\n"


# Columns of a step row, in order, each with its type (a float column takes a JSON integer
# too). None means "not measured" (shown as N/A, never 0). The monitor checks each column of
# a row against its type (session/steps.py ``Step``, whose fields these are: a test holds
# them equal).
STEP_COLUMNS: dict[str, Any] = {
    "step": int,  # 1-based optimizer-step counter in this process
    "t": float,  # wall-clock time (Unix seconds) at the end of the step
    "step_ms": float | None,  # wall time since the previous step ended
    "data_ms": float | None,  # time blocked in DataLoader iteration during the step
    "samples": int | None,  # samples consumed by the step (sum of the batches' first dimension)
    "batches": int | None,  # batches fetched during the step (>1 under gradient accumulation)
    "gpu_ms": float | None,  # GPU time between the step's first batch and its end (CUDA events)
    "mem_alloc": int | None,  # CUDA bytes allocated by tensors (sampled at most ~10x/s)
    "mem_reserved": int | None,  # CUDA bytes held by the caching allocator (sampled likewise)
    "mem_peak": int | None,  # peak CUDA bytes allocated so far (sampled likewise)
    "comm_ms": float | None,  # waiting in collectives (DDP all-reduce, ...; hook/collectives.py)
    # From the model's forwards and the step's marks (hook/model_probe.py, docs/steps.md):
    "tokens": int | None,  # token ids its training forwards received (non-padding where masked)
    "host_gap_ms": float | None,  # host time outside the phases before each training forward
    "part_data_ms": float | None,  # the step's parts on the clock part_clock names: data (gap)
    "part_fwd_ms": float | None,  # ... the model's training forwards
    "part_bwd_ms": float | None,  # ... the backward they started
    "part_opt_ms": float | None,  # ... the optimizer's step
    "part_rest_ms": float | None,  # ... everything else in the step (loss, clipping, logging)
    "part_clock": str | None,  # "gpu" (CUDA events) or "host"; None: the step was not split
}
STEP_FIELDS: tuple[str, ...] = tuple(STEP_COLUMNS)
# A field's position in a row: row[COLUMN["gpu_ms"]].
COLUMN: dict[str, int] = {name: index for index, name in enumerate(STEP_FIELDS)}

# -- knobs: what a script declares (the hook's Knob.describe()) and what a value must be -------

KNOB_KINDS = ("bool", "int", "choice")
KnobValue = bool | int | str  # what a knob holds: a switch, a number, or a choice
KnobSpec = dict[str, Any]  # a knob as declared (Knob.describe()): checked field by field


def validate_knob(spec: KnobSpec, value: object) -> KnobValue:
    """``value`` as the knob takes it, or ValueError saying why not. Strict: a JSON true/false
    for a switch, a whole number within bounds for a number (never a bool, a float or a
    string), one of the choices (of the same type) for a choice. Both sides check with it."""
    kind, name = spec.get("kind"), spec.get("name")
    if kind == "bool":
        if type(value) is bool:
            return value
        raise ValueError(f"{name} takes true or false, not {shown(value)}")
    if kind == "int":
        if type(value) is not int:
            raise ValueError(f"{name} takes a whole number, not {shown(value)}")
        low, high = spec.get("min"), spec.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{name} must be within {low}..{high}, not {value}")
        return value
    if kind == "choice":
        choices = spec.get("choices") or []
        if not isinstance(value, (bool, int, str)) or not any(
            type(value) is type(c) and value == c for c in choices
        ):
            listed = ", ".join(map(str, choices))
            raise ValueError(f"{name} is one of {listed}, not {shown(value)}")
        return value
    raise ValueError(f"unknown knob kind {shown(kind)}")


def parse_knob(spec: KnobSpec, text: object) -> KnobValue:
    """A value a person typed (TUI, --schedule, --try) as the knob takes it: "16" for a
    number, "on"/"off"/"true"/"false" for a switch; then ``validate_knob``."""
    if not isinstance(text, str):
        return validate_knob(spec, text)
    kind, cleaned = spec.get("kind"), text.strip()
    if kind == "bool" and cleaned.lower() in ("true", "false", "on", "off", "1", "0"):
        return cleaned.lower() in ("true", "on", "1")
    if kind == "int" and cleaned.lstrip("-").isdigit():
        return validate_knob(spec, int(cleaned))
    if kind == "choice":
        typed = next((c for c in spec.get("choices") or [] if str(c) == cleaned), cleaned)
        return validate_knob(spec, typed)
    return validate_knob(spec, text)


def shown(value: object, limit: int = 40) -> str:
    """A value in an error message, cut short: a refusal never echoes a megabyte back."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A line longer than this is malformed: no honest frame comes near it (a batch at ~10/s).
MAX_FRAME_BYTES = 4 * 1024 * 1024
# What a monitor sends the hook (set_knob, scan_syncs) is a few hundred bytes: the hook
# refuses longer lines before parsing them.
MAX_COMMAND_BYTES = 16 * 1024


class UnsafeRuntimeDir(RuntimeError):
    """The socket directory cannot hold our sockets safely (another user's, open to others,
    or a path too long for a socket); the message says how to get round it."""


def encode(frame_type: str, **fields: Any) -> bytes:
    """Serialise one frame, newline-terminated."""
    body = {"v": VERSION, "type": frame_type, **fields}
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def encode_row(row: list[Any]) -> bytes:
    """One step row as JSON, for ``encode_steps``: a row is encoded once, however many
    monitors (and late monitors' backlogs) it goes to."""
    return json.dumps(row, separators=(",", ":"), allow_nan=False).encode()


def encode_steps(pid: int, encoded_rows: list[bytes], at: float | None = None) -> bytes:
    """A STEPS frame of rows already encoded by ``encode_row``; the same bytes as
    ``Steps(pid, rows, at).encode()``."""
    head = f'{{"v":{VERSION},"type":"{STEPS}","pid":{int(pid)},"rows":['.encode()
    tail = b"]}\n" if at is None else f'],"at":{float(at)!r}}}\n'.encode()
    return head + b",".join(encoded_rows) + tail


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400 parses as inf
        raise ValueError(f"number out of range: {text[:20]}")
    return number


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


# One decoder for every frame: json.loads with these hooks builds a new one on each call, which
# was half the cost of decoding a step frame (dev box, 2026-11-24: 10.9 -> 4.3 us).
_STRICT = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


def decode(line: bytes | str) -> Any:
    """One JSON value, strict: NaN, Infinity and numbers that overflow are refused
    (ValueError), and so is nesting too deep to parse (RecursionError becomes ValueError):
    a frame can never put a non-finite number into a knob or a figure."""
    try:
        return _STRICT.decode(line.decode() if isinstance(line, bytes) else line)
    except RecursionError as error:
        raise ValueError("nested too deeply") from error


class FrameDecoder:
    """Turns a byte stream into frames; malformed or foreign frames are counted, never raised.

    A line longer than ``max_frame_bytes`` is dropped as it arrives (the rest of it up to its
    newline too), so an endless line costs neither memory nor parsing.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._parts: list[bytes] = []
        self._buffered = 0
        self._skipping = False  # inside an over-long line: drop up to its newline
        self.max_frame_bytes = max_frame_bytes
        self.malformed = 0
        self.unsupported_version = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Return the complete frames in ``data`` plus what was buffered before."""
        frames = []
        *lines, rest = data.split(b"\n")
        for line in lines:
            if self._skipping:
                self._skipping = False
                continue
            if self._parts:
                line = b"".join([*self._parts, line])
                self._parts, self._buffered = [], 0
            if len(line) > self.max_frame_bytes:
                self.malformed += 1
                continue
            frame = self._parse(line)
            if frame is not None:
                frames.append(frame)
        if rest and not self._skipping:
            self._parts.append(rest)
            self._buffered += len(rest)
            if self._buffered > self.max_frame_bytes:
                self._parts, self._buffered = [], 0
                self._skipping = True
                self.malformed += 1
        return frames

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            frame = decode(line)
        except (ValueError, UnicodeDecodeError):
            self.malformed += 1
            return None
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            self.malformed += 1
            return None
        if frame.get("v") != VERSION:
            self.unsupported_version += 1
            return None
        return frame


def runtime_dir(create: bool = True) -> Path:
    """The private per-user directory that holds the hooks' sockets.

    ``$XDG_RUNTIME_DIR/gputop-train-<uid>`` where that exists (desktops, most SSH logins),
    else ``/tmp/gputop-train-<uid>`` (the GPU machines have no XDG_RUNTIME_DIR); the name
    always carries the uid, so an XDG_RUNTIME_DIR of /tmp is never shared between users.
    ``GPUTOP_TRAIN_RUNTIME_DIR`` overrides both. The directory must be ours and mode 0700:
    anyone who can connect can change knobs (docs/security.md).
    """
    override = os.environ.get(RUNTIME_DIR_ENV)
    return _private_dir(Path(override) if override else None, create)


def user_runtime_dir(create: bool = True) -> Path:
    """The user's own runtime directory, whatever ``GPUTOP_TRAIN_RUNTIME_DIR`` says: for what
    every process of the user must share (the autogroup guards of one terminal session)."""
    return _private_dir(None, create)


def _private_dir(override: Path | None, create: bool) -> Path:
    name = f"gputop-train-{os.getuid()}"
    if override:
        path = override
    elif os.environ.get("XDG_RUNTIME_DIR") and Path(os.environ["XDG_RUNTIME_DIR"]).is_dir():
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / name
    else:
        path = Path(tempfile.gettempdir()) / name
    if create:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700, parents=True)
    _check_private(path)
    _check_socket_length(path)
    return path


_WAY_ROUND = f"or set {RUNTIME_DIR_ENV} to a private directory of your own"


def _check_private(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDir(f"{path} is not a directory; remove it {_WAY_ROUND}")
    if info.st_uid != os.getuid():
        raise UnsafeRuntimeDir(
            f"{path} belongs to uid {info.st_uid}, not to us ({os.getuid()}): another user "
            f"created it; {_WAY_ROUND}"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise UnsafeRuntimeDir(
            f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run: chmod 700 {path}, {_WAY_ROUND}"
        )


# sockaddr_un.sun_path holds 108 bytes on Linux, 104 on macOS, the terminating NUL included.
MAX_SOCKET_PATH_BYTES = 103
# The longest socket name: a PID of 7 digits (Linux's pid_max is at most 2^22).
_LONGEST_SOCKET_NAME = "4194304.sock"


def _check_socket_length(path: Path) -> None:
    longest = len(os.fsencode(path / _LONGEST_SOCKET_NAME))
    if longest > MAX_SOCKET_PATH_BYTES:
        raise UnsafeRuntimeDir(
            f"socket paths in {path} would be {longest} bytes, over the "
            f"{MAX_SOCKET_PATH_BYTES} a Unix socket allows; set {RUNTIME_DIR_ENV} to a "
            "shorter directory (e.g. /tmp/gputop-$USER)"
        )


def receive(sock: socket.socket, size: int) -> bytes | None:
    """What a non-blocking socket has for us: None while nothing has come, b"" once the peer
    closed it or it failed (either side of the wire reads its peer so)."""
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def process_exists(pid: int) -> bool:
    """Whether ``pid`` is a process (another user's counts): the one test of liveness that
    the hook (is its monitor still there?) and the monitor (is a socket's job gone?) share."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # not a PID at all
        return False
    return True


def socket_path(pid: int, directory: Path | None = None) -> Path:
    """Where the hook of process ``pid`` listens."""
    return (directory or runtime_dir(create=False)) / f"{pid}.sock"


def binding_path(socket: Path) -> Path:
    """Where the hook binds its socket before it listens (then renames it to ``socket``): a
    name no longer than the socket's, so the runtime directory's length check holds for it,
    and not ending in .sock, so no monitor takes it for a job's."""
    return socket.with_suffix(".bind")


# -- frames: one class per type, with encode and a checking decode ----------------------------


class MalformedFrame(ValueError):
    """A frame whose fields are not of their declared types (counted and dropped)."""


@dataclass(frozen=True)
class Frame:
    """One frame. ``TYPE`` is its ``"type"``; the fields are its keys. Fields a newer peer
    adds are ignored on decode; a field left out takes its default (None: not known)."""

    TYPE: ClassVar[str] = ""
    ABSENT_WHEN_NONE: ClassVar[tuple[str, ...]] = ()  # keys left out, not sent as null

    def fields(self) -> dict[str, Any]:
        """The frame's keys and values (as ``latest`` holds them, with ``type``)."""
        return {"type": self.TYPE, **self._body()}

    def encode(self) -> bytes:
        """The frame on the wire, newline-terminated."""
        return encode(self.TYPE, **self._body())

    def _body(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in self.ABSENT_WHEN_NONE:
            if body[name] is None:
                del body[name]
        return body

    @classmethod
    def decode(cls: type[F], raw: dict[str, Any]) -> F:
        """The frame a decoded JSON object holds, every field checked (MalformedFrame)."""
        hints = field_types(cls)
        values = {
            f.name: checked(raw[f.name], hints[f.name], f.name)
            for f in fields(cls)
            if f.name in raw
        }
        try:
            return cls(**values)
        except TypeError as error:  # a required field missing
            raise MalformedFrame(f"{cls.TYPE}: {error}") from None

    @classmethod
    def decode_known(cls: type[F], raw: dict[str, Any]) -> F:
        """As ``decode``, but a field of the wrong type is left unknown (its default) rather
        than refusing the frame: how a recording's hello and knob outcomes were always read
        (an old or damaged file still plays). MalformedFrame only for a required field."""
        hints = field_types(cls)
        values = {}
        for f in fields(cls):
            if f.name in raw:
                with contextlib.suppress(TypeError):
                    values[f.name] = checked(raw[f.name], hints[f.name], f.name)
        try:
            return cls(**values)
        except TypeError as error:
            raise MalformedFrame(f"{cls.TYPE}: {error}") from None


F = TypeVar("F", bound=Frame)
FRAMES: dict[str, type[Frame]] = {}  # "type" -> class: every frame of the protocol


def frame(frame_type: str) -> Callable[[type[F]], type[F]]:
    """Register a frame class under its ``"type"`` (documented in docs/protocol.md)."""

    def register(cls: type[F]) -> type[F]:
        if frame_type in FRAMES:
            raise ValueError(f"frame type {frame_type!r} registered twice")
        cls.TYPE = frame_type
        FRAMES[frame_type] = cls
        return cls

    return register


def decode_frame(raw: dict[str, Any]) -> Frame | None:
    """The typed frame of a decoded JSON object (FrameDecoder's output); None for an unknown
    type or a field of the wrong type: the caller counts it as malformed."""
    cls = FRAMES.get(raw.get("type"))  # type: ignore[arg-type]
    if cls is None:
        return None
    try:
        return cls.decode(raw)
    except (MalformedFrame, TypeError, ValueError):
        return None


# Hook -> monitor.


@frame(HELLO)
@dataclass(frozen=True)
class Hello(Frame):
    """Who the process is, what it declared, and what a monitor that comes late missed."""

    pid: int
    ppid: int | None = None
    host: str | None = None
    argv: list[str] | None = None
    python: str | None = None
    torch: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    started_at: float | None = None
    step_fields: list[str] | None = None
    step: int | None = None  # steps so far
    knobs: list[dict[str, Any]] | None = None
    knob_history: list[dict[str, Any]] | None = None  # knob_applied fields, oldest first
    latest: list[dict[str, Any]] | None = None  # the latest fact frames, with their "type"
    # The PID of the monitor whose recording this process appends its step rows to itself
    # (RECORDING_ENV): that monitor records none of them; None: it appends to none.
    rows_recorded_for: int | None = None
    # The first step whose row it did not append, having stopped (ROWS_UNRECORDED): that
    # monitor records this row and every later one itself; None: it still appends them all.
    rows_unrecorded_from: int | None = None


@frame(STEPS)
@dataclass(frozen=True)
class Steps(Frame):
    """A batch of step rows, columns named by STEP_FIELDS (each row checked by the reader)."""

    ABSENT_WHEN_NONE = ("at",)

    pid: int
    rows: list[Any]
    # When the hook sent it (Unix s): a monitor that reads it later knows how far behind the
    # job it is (a status says "N steps behind").
    at: float | None = None

    @staticmethod
    def encode_rows(pid: int, encoded_rows: list[bytes], at: float | None = None) -> bytes:
        """The fast path: a frame of rows already encoded once by ``encode_row``."""
        return encode_steps(pid, encoded_rows, at)


@frame(ROWS_UNRECORDED)
@dataclass(frozen=True)
class RowsUnrecorded(Frame):
    """The hook stopped appending its step rows to the recording of the monitor it named in
    its hello (``rows_recorded_for``): that monitor records the rows from ``from_step`` on
    itself. Sent before the rows it concerns (hook/row_log.py)."""

    pid: int
    from_step: int
    reason: str


@frame(NOTICE)
@dataclass(frozen=True)
class Notice(Frame):
    text: str
    pid: int | None = None


@frame(BYE)
@dataclass(frozen=True)
class Bye(Frame):
    pid: int


@frame(KNOBS)
@dataclass(frozen=True)
class Knobs(Frame):
    knobs: list[dict[str, Any]]  # each a Knob.describe(): name, kind, value, help, ...


@frame(KNOB_APPLIED)
@dataclass(frozen=True)
class KnobApplied(Frame):
    """The outcome of a change. ``id`` and ``name`` are echoed as sent (cut short)."""

    name: Any
    value: Any
    ok: bool
    previous: Any = None
    error: str | None = None
    step: int | None = None  # the boundary it applied at; None for a refusal
    reverted: bool = False
    t: float | None = None
    id: Any = None
    seq: int | None = None  # absent on a refusal

    ABSENT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("seq",)


@frame(LOADER)
@dataclass(frozen=True)
class Loader(Frame):
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    batch_size: int | None = None
    dtype: str | None = None
    shape: list[int] | None = None
    bytes: int | None = None
    pinned: bool | None = None
    # Where the script constructed this DataLoader (the first frame outside torch and
    # gputop-train); None where the hook did not see it constructed.
    constructed_at: CodeSite | None = None


class CodeSite(TypedDict):
    """A line of the user's script (hook/code_sites.py: the first caller outside torch and
    gputop-train): checked key by key on decode."""

    file: str  # as Python names the file (absolute where the script was run by path)
    line: int
    op: str  # the source line, cut to 160 characters ("" where unreadable)


class SyncSite(CodeSite):
    """One call site of a sync scan (hook/probes.py)."""

    count: int


@frame(SYNCS)
@dataclass(frozen=True)
class Syncs(Frame):
    count: int
    sites: list[SyncSite]  # the ten most frequent
    step: int | None = None


@frame(FLOPS)
@dataclass(frozen=True)
class Flops(Frame):
    flops: int | None
    samples: int | None = None
    step: int | None = None


@frame(MODEL)
@dataclass(frozen=True)
class Model(Frame):
    step: int | None = None
    cuda: bool | None = None
    capability: list[int] | None = None
    device_uuid: str | None = None  # the trained parameters' GPU, "GPU-..." as NVML says
    autocast: str | None = None
    param_dtype: str | None = None
    tf32_matmul: bool | None = None
    tf32_cudnn: bool | None = None
    channels_last: bool | None = None
    compiled: bool | None = None
    matmul_precision: str | None = None  # torch.get_float32_matmul_precision()
    optimizer: str | None = None  # the optimizer's class name
    optimizer_foreach: bool | None = None
    optimizer_fused: bool | None = None


class Census(TypedDict, total=False):
    """What one counted step computes (hook/workload.py): its operators, parameters and
    analytic FLOPs; or ``skipped``, why no step was counted. Every key may be absent (an
    older hook) and every figure null (not known); decode checks each key's type."""

    ops: int | None  # operators launched per step (views excluded)
    optimizer_ops: int | None  # of which inside optimizer.step()
    fused_attention: int | None  # SDPA-backed attention calls
    manual_attention: int | None  # softmax over (B, H, T, T) scores
    attention_at: CodeSite | None  # the script's line of the first such softmax
    convolutions: int | None
    fp8_matmuls: int | None
    params: int | None
    non_embedding_params: int | None
    analytic_flops: int | None  # 6 N tokens + attention, per optimizer step
    analytic_note: str | None  # why analytic_flops is null
    tokens: int | None  # per optimizer step, through the token embedding
    sequence: int | None
    matmul_precision: str | None  # "bf16", "fp16", "tf32", "fp32", "fp8"
    census_error: str | None
    skipped: str | None  # why the step was not counted (a compiled model, an old torch)


class KernelProfile(TypedDict, total=False):
    """One profiled step's CUDA kernels (hook/kernel_profile.py); keys as ``Census``'s."""

    kernels: int | None
    triton_kernels: int | None  # generated by torch.compile
    kernel_ms: float | None
    non_math_pct: float | None  # share of kernel time outside GEMM/attention/conv
    top_non_math: list[str]
    probe_ms: float | None  # what stopping the profiler cost the job


class MatmulPeak(TypedDict, total=False):
    """The device's matmul peak at a precision, measured once (hook/matmul_peak.py), or the
    reason it was not; keys as ``Census``'s."""

    precision: str | None
    device: str | None
    repeats: int | None
    enqueue_ms: float | None
    run_ms: float | None
    tflops: float | None
    reason: str | None


@frame(WORKLOAD)
@dataclass(frozen=True)
class Workload(Frame):
    """What one step computes (census), one step's kernels (profile) and the matmul peak;
    republished whole as each part arrives (docs/advisor.md, MFU)."""

    step: int | None = None
    census: Census | None = None
    profile: KernelProfile | None = None
    peak: MatmulPeak | None = None


@frame(STEP_PARTS)
@dataclass(frozen=True)
class StepParts(Frame):
    """The module whose training forwards are counted and timed, or why none is (then
    samples and tokens from the forward and the step's parts read N/A; docs/steps.md)."""

    step: int | None = None
    model: str | None = None
    reason: str | None = None


@frame(MEMORY_AUDIT)
@dataclass(frozen=True)
class MemoryAudit(Frame):
    """What GPU memory holds (bytes), from the optimizer's tensors and the allocator's
    statistics (hook/memory_audit.py)."""

    step: int | None = None
    params_bytes: int | None = None
    grads_bytes: int | None = None
    optimizer_bytes: int | None = None
    allocated_peak: int | None = None
    reserved_peak: int | None = None
    allocated: int | None = None
    reserved: int | None = None
    alloc_retries: int | None = None
    ooms: int | None = None
    device_total: int | None = None


# Monitor -> hook.


@frame(SET_KNOB)
@dataclass(frozen=True)
class SetKnob(Frame):
    ABSENT_WHEN_NONE = ("at_step", "trial")

    id: Any
    name: Any
    value: Any
    at_step: int | None = None  # several ranks: each applies it after exactly this step
    # True: a trial (--try, the autopilot) that belongs to this connection: the hook puts the
    # value before it back if the connection ends first (unless kept by KEEP_TRIALS).
    trial: bool | None = None


@frame(ALIVE)
@dataclass(frozen=True)
class Alive(Frame):
    """The monitor is at work: a hook at its limit of clients gives the slot of one silent
    for long to a new one (hook/listener.py SILENT_EVICT_S)."""


@frame(KEEP_TRIALS)
@dataclass(frozen=True)
class KeepTrials(Frame):
    """The autopilot kept these trials: they stay when this monitor leaves."""

    names: list[str]


@frame(AUTOPILOT_DONE)
@dataclass(frozen=True)
class AutopilotDone(Frame):
    """The autopilot has finished: ``hook.autopilot_active()`` turns False."""


@frame(SCAN_SYNCS)
@dataclass(frozen=True)
class ScanSyncs(Frame):
    pass


@frame(WHERE_WAITING)
@dataclass(frozen=True)
class WhereWaiting(Frame):
    """Which collective the training thread waits in now (a stall's dump, docs/ranks.md)."""


@frame(WAITING)
@dataclass(frozen=True)
class Waiting(Frame):
    """The answer to WHERE_WAITING, sent from the hook's own thread."""

    pid: int
    at: float  # when it answered (Unix s)
    step: int | None = None  # steps so far
    collective: str | None = None  # what the training thread waits in; None: none
    since: float | None = None  # since when (Unix s)


# -- checking a decoded value against its declared type ----------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}


def field_types(cls: type) -> dict[str, Any]:
    """A class's field types, resolved once: a frame's, its objects' (TypedDict) and an
    event's (events.py)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def checked(value: Any, hint: Any, name: str) -> Any:
    """``value`` if it is of type ``hint``, else TypeError naming the field. Strict as JSON
    is: a bool is no number, a number is finite; a list item is checked to its type; a
    ``tuple[X, ...]`` hint takes a JSON list and returns a tuple."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        refusals: list[TypeError] = []
        for option in options:
            if option is not type(None):
                try:
                    return checked(value, option, name)
                except TypeError as error:
                    if isinstance(value, dict) and typing.is_typeddict(option):
                        refusals.append(error)  # an object of its shape: which key is wrong
        if len(refusals) == 1:
            raise refusals[0]
        named = " or ".join("null" if o is type(None) else _type_name(o) for o in options)
        raise TypeError(f"{name} must be {named}, not {shown(value)}")
    if hint is bool:
        ok = type(value) is bool
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif hint is str:
        ok = isinstance(value, str)
    elif typing.is_typeddict(hint):
        if not isinstance(value, dict):
            raise TypeError(f"{name} is not an object")
        for key, key_hint in field_types(hint).items():
            if key in value:
                checked(value[key], key_hint, f"{name}.{key}")
            elif key in hint.__required_keys__:
                raise TypeError(f"{name} has no {key}")
        return value
    elif hint is dict or origin is dict:
        ok = isinstance(value, dict)
    elif hint is list or origin is list:
        if not isinstance(value, list):
            raise TypeError(f"{name} is not a list")
        item = (typing.get_args(hint) or (Any,))[0]
        if item is not Any:
            for entry in value:
                checked(entry, item, name)
        return value
    elif origin is tuple:
        if not isinstance(value, list | tuple):
            raise TypeError(f"{name} is not a list")
        item = typing.get_args(hint)[0]
        return tuple(checked(entry, item, name) for entry in value)
    else:
        raise TypeError(f"{name}: no check for {hint}")
    if not ok:
        raise TypeError(f"{name} must be {_type_name(hint)}, not {shown(value)}")
    return value


def _type_name(hint: Any) -> str:
    """A declared type as a refusal names it ("int", "list[str]")."""
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)
