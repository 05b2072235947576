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
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

VERSION = 1

# Hook -> monitor.
HELLO = "hello"  # once per connection: who the process is
STEPS = "steps"  # a batch of step rows, columns named by STEP_FIELDS
NOTICE = "notice"  # a human-readable event ("hook disabled: ...")
BYE = "bye"  # the process is exiting; no more frames follow
KNOBS = "knobs"  # the knobs the script declared (also in hello)
KNOB_APPLIED = "knob_applied"  # the outcome of a change: the value in force, or why not
SYNCS = "syncs"  # a sync scan of one step: count and call sites
FLOPS = "flops"  # FLOPs of one whole step, counted once
LOADER = "loader"  # facts about the DataLoader and its batches, once per epoch it feeds
MODEL = "model"  # facts about the forward pass: CUDA, autocast, parameter dtype, TF32, layout

# Monitor -> hook.
SET_KNOB = "set_knob"  # change one knob at the next step boundary
SCAN_SYNCS = "scan_syncs"  # run a sync scan on the next step

# The launcher hands a --schedule to the job here (JSON list of {"step": N, "set": {...}}),
# so that every entry applies at exactly its step, however late the monitor connects.
SCHEDULE_ENV = "GPUTOP_TRAIN_SCHEDULE"

# Columns of a step row, in order. None means "not measured" (shown as N/A, never 0).
STEP_FIELDS: tuple[str, ...] = (
    "step",  # 1-based optimizer-step counter in this process
    "t",  # wall-clock time (Unix seconds) at the end of the step
    "step_ms",  # wall time since the previous step ended
    "data_ms",  # time blocked in DataLoader iteration during the step
    "samples",  # samples consumed by the step (sum of the batches' first dimension)
    "batches",  # batches fetched during the step (>1 under gradient accumulation)
    "gpu_ms",  # GPU time between the step's first batch and its end (CUDA events)
    "mem_alloc",  # CUDA bytes allocated by tensors (sampled at most ~10x/s)
    "mem_reserved",  # CUDA bytes held by the caching allocator (sampled likewise)
    "mem_peak",  # peak CUDA bytes allocated so far (sampled likewise)
)

# A line longer than this is malformed: no honest frame comes near it (a batch at ~10/s).
MAX_FRAME_BYTES = 4 * 1024 * 1024

RUNTIME_DIR_ENV = "GPUTOP_TRAIN_RUNTIME_DIR"


class UnsafeRuntimeDir(RuntimeError):
    """The socket directory exists but another user could read or replace our sockets."""


def encode(frame_type: str, **fields: Any) -> bytes:
    """Serialise one frame, newline-terminated."""
    body = {"v": VERSION, "type": frame_type, **fields}
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode() + b"\n"


class FrameDecoder:
    """Turns a byte stream into frames; malformed or foreign frames are counted, never raised."""

    def __init__(self) -> None:
        self._buffer = b""
        self.malformed = 0
        self.unsupported_version = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Return the complete frames in ``data`` plus what was buffered before."""
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_FRAME_BYTES:
            self._buffer = b""
            self.malformed += 1
        frames = []
        for line in lines:
            frame = self._parse(line)
            if frame is not None:
                frames.append(frame)
        return frames

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            frame = json.loads(line)
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

    ``$XDG_RUNTIME_DIR/gputop-train`` where that exists (desktops, most SSH logins),
    else ``/tmp/gputop-train-<uid>`` (the GPU machines have no XDG_RUNTIME_DIR). The
    directory must be ours and mode 0700: anyone who can connect can change knobs.
    """
    override = os.environ.get(RUNTIME_DIR_ENV)
    if override:
        path = Path(override)
    elif os.environ.get("XDG_RUNTIME_DIR") and Path(os.environ["XDG_RUNTIME_DIR"]).is_dir():
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "gputop-train"
    else:
        path = Path(tempfile.gettempdir()) / f"gputop-train-{os.getuid()}"
    if create:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700, parents=True)
    _check_private(path)
    return path


def _check_private(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDir(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafeRuntimeDir(f"{path} belongs to uid {info.st_uid}, not to us ({os.getuid()})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise UnsafeRuntimeDir(
            f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run: chmod 700 {path}"
        )


def socket_path(pid: int, directory: Path | None = None) -> Path:
    """Where the hook of process ``pid`` listens."""
    return (directory or runtime_dir(create=False)) / f"{pid}.sock"
