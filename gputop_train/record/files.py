"""The files of one session: the recording, the job's log, the summaries.

All are the user's alone (0600, in a 0700 directory: a recorded command line may hold a
token), created anew (an existing recording is never appended to: two sessions in one file
summarise as one wrong session), and written without following a symlink planted where they
go (``O_NOFOLLOW``; summaries are written to a private temporary file, then renamed over).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from pathlib import Path

from .. import wire
from .paths import new_session_stem

PRIVATE_FILE = 0o600
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


class RecordError(ValueError):
    """A recording cannot go where it was asked to; the message says why and what to do."""


def create_private(path: Path, append: bool = False) -> int:
    """A new file of ours at ``path`` (0600), never an existing one or a symlink's target."""
    return os.open(path, _CREATE | (os.O_APPEND if append else 0), PRIVATE_FILE)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: written to a private temporary file beside it, then
    renamed over it (a symlink planted at ``path`` is replaced, never followed)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def save_screenshot(stem: Path, svg: str, now: float) -> Path:
    """The TUI's screenshot as ``STEM.screenshot-HH-MM-SS.svg`` beside the session's other
    files, private like them; a second one in the same second gets ``-2``, ``-3``..."""
    clock = time.strftime("%H-%M-%S", time.localtime(now))
    for attempt in range(1, 100):
        suffix = "" if attempt == 1 else f"-{attempt}"
        path = stem.parent / f"{stem.name}.screenshot-{clock}{suffix}.svg"
        try:
            fd = create_private(path)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(svg)
        return path
    raise FileExistsError(f"{stem}.screenshot-{clock}-*.svg: 99 taken already")


def recording_stem(record: str | None, command: list[str]) -> Path:
    """Where the session's files go: ``--record PATH`` (its .jsonl suffix dropped) or a new
    name in the sessions directory. RecordError, with the fix, for a place that cannot work."""
    if record is None:
        return new_session_stem(command)
    path = Path(record)
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "a device or a pipe"
        raise RecordError(f"--record {record}: that is {kind}; give a file name to record to")
    stem = path.with_suffix("") if path.suffix == ".jsonl" else path
    recording = Path(f"{stem}.jsonl")
    parent = recording.parent
    if not parent.is_dir():
        raise RecordError(f"--record {record}: no directory {parent}; create it or choose another")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RecordError(f"--record {record}: {parent} is not writable by you; choose another")
    for taken in (recording, Path(f"{stem}.log")):
        if taken.exists() or taken.is_symlink():
            raise RecordError(
                f"--record {record}: {taken} exists; gputop-train never appends to a recording: "
                "give a new name"
            )
    return stem


def describe_os_error(error: OSError, path: Path) -> str:
    """An OSError on one of our files, as a line a person can act on."""
    reasons = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "not permitted (a protected file: check its owner and directory)",
        errno.EEXIST: "it exists already",
        errno.ELOOP: "it is a symlink",
        errno.EIO: "the disk failed (I/O error)",
    }
    if error.errno in (errno.EACCES, errno.EPERM):
        owner = _other_owner(path)
        if owner is not None:
            return (
                f"{path}: it belongs to another user (uid {owner}); remove it as that user, "
                "or write elsewhere"
            )
    return f"{path}: {reasons.get(error.errno or 0, error.strerror or str(error))}"


def _other_owner(path: Path) -> int | None:
    """The uid owning ``path`` when it is not ours: why EPERM on a file in /tmp."""
    try:
        uid = path.lstat().st_uid
    except OSError:
        return None
    return uid if uid != os.getuid() else None


def temporary_log_path() -> Path:
    """A private log for a session that is not recorded (--no-record): removed at the end
    unless the job is left running (the monitor then says where it is)."""
    directory = wire.runtime_dir(create=True)  # private: 0700, owner checked
    fd, path = tempfile.mkstemp(prefix="job-", suffix=".log", dir=directory)
    os.close(fd)
    os.unlink(path)  # created again by create_private, exclusively
    return Path(path)
