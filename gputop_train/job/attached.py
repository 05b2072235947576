"""``gputop-train attach PID``: find a running job whose hook listens, and face it like a launch.

A job started by gputop-train outlives its monitor ("leave it running", an SSH drop); its hook
keeps listening on a socket named after its PID, with a ring of recent steps and its knob
history. Attaching connects a new monitor to it. The process is not our child: it is signalled
alone (never its group), and its exit code cannot be read.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import wire
from .stop_ladder import STOP_GRACE_S

# A process that is not our child cannot be waited for: its state is polled.
POLL_S = 0.25


class AttachError(RuntimeError):
    """Nothing to attach to; the message says why and what to do."""


class AttachedJob:
    """A running process found by PID, with ``launch.LaunchedJob``'s interface."""

    owned = False

    def __init__(self, process: Any) -> None:
        self.process = process
        self.pid: int = process.pid
        self.tell: Callable[[str], None] = lambda text: None
        self.where_waiting: Callable[[], str | None] = lambda: None

    def running(self) -> bool:
        with contextlib.suppress(Exception):
            return self.process.is_running() and self.process.status() != "zombie"
        return False

    def wait(self) -> int | None:
        """Block until the process ends (a zombie has ended: its parent has yet to reap it).
        None: only the parent can read the exit code."""
        while self.running():
            time.sleep(POLL_S)
        return None

    def interrupt(self) -> str:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)
        return "SIGINT"

    def terminate(self) -> str:
        """A job we only watch is not ours to end: a SIGTERM of the monitor detaches."""
        return "nothing (attached: the job runs on)"

    def stop(self) -> None:
        """Ctrl+C to this process alone, as its own terminal would; never SIGTERM or SIGKILL:
        a job we only watch is not ours to kill. Still there after SIGINT's grace, it is
        told where each rank waits and how to end it (``tell``, ``where_waiting``)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)
            os.kill(self.pid, signal.SIGCONT)  # a stopped job runs its handlers
        deadline = time.monotonic() + STOP_GRACE_S[0]
        while self.running() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if not self.running():
            return
        self.tell(
            f"PID {self.pid} has not exited {STOP_GRACE_S[0]:g} s after SIGINT; attached, "
            f"gputop-train does not kill it. To end it: kill -TERM {self.pid}, then "
            f"kill -KILL {self.pid}"
        )
        where = self.where_waiting()
        if where:
            self.tell(where)


def find_job(pid: int, psutil_module: Any = None) -> tuple[AttachedJob, list[str], bool]:
    """The process, its command line, and whether it (or a child: torchrun's ranks) is hooked.
    A process of another user is refused: neither its socket nor its memory is ours to read."""
    if psutil_module is None:
        import psutil as psutil_module
    try:
        process = psutil_module.Process(pid)
        command = process.cmdline() or [process.name()]
    except psutil_module.NoSuchProcess:
        raise AttachError(f"no process with PID {pid} (is it still running? see ps)") from None
    except psutil_module.AccessDenied:
        raise AttachError(f"PID {pid} belongs to another user: attach as that user") from None
    directory = wire.runtime_dir(create=False)
    tree = [process]
    with contextlib.suppress(psutil_module.Error):
        tree += process.children(recursive=True)
    if any(wire.socket_path(p.pid, directory).exists() for p in tree):
        return AttachedJob(process), command, True
    owner = None
    with contextlib.suppress(psutil_module.Error):
        owner = process.username()
    if owner is not None and owner != getpass.getuser():
        raise AttachError(
            f"PID {pid} ({command[0]}) belongs to {owner}: its hook's socket is in that "
            f"user's private directory; run gputop-train attach as {owner}"
        )
    return AttachedJob(process), command, False


def python_process(pid: int) -> bool | None:
    """Whether the process runs a Python interpreter (its executable, or libpython in its
    memory map); None where /proc cannot tell (another user's, or gone)."""
    try:
        if "python" in os.path.basename(os.readlink(f"/proc/{pid}/exe")):
            return True
        with open(f"/proc/{pid}/maps") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return None


def no_hook_advice(pid: int, command: list[str]) -> str:
    """What a job without the hook misses, and how to get it."""
    return (
        f"PID {pid} ({' '.join(command)[:80]}) is not listening for gputop-train: no hook "
        f"socket in {wire.runtime_dir(create=False)} for it or its children. Step times, "
        f"knobs and sync scans need the hook: start the job with gputop-train, or call "
        f"gputop_train.hook.install() in the script (a hooked job opens its socket at its "
        f"first optimizer step)"
    )


def output_of(pid: int) -> Path | str:
    """Where a process's stdout goes: the file, when it is one (the Log tab shows it), else
    what it is ("a terminal (/dev/pts/3)", "a pipe"), read from /proc."""
    try:
        target = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return "an unknown place (its /proc entry cannot be read)"
    if target.startswith("/") and Path(target).is_file():
        return Path(target)
    if target.startswith("/dev/pts") or target.startswith("/dev/tty"):
        return f"a terminal ({target})"
    if target.startswith("pipe:"):
        return "a pipe (its reader has it)"
    return target


def hooked_jobs(psutil_module: Any = None) -> list[tuple[int, list[str]]]:
    """Our running processes whose hook listens, by PID, with their command lines:
    jobs left running (a monitor that left, or was killed) are one ``attach PID`` away. A
    socket whose process is gone (a job killed with SIGKILL), or whose PID a younger process
    now has, is not a job."""
    if psutil_module is None:
        import psutil as psutil_module
    directory = wire.runtime_dir(create=False)
    if not directory.is_dir():
        return []
    found = []
    sockets = {int(p.stem): p for p in directory.glob("*.sock") if p.stem.isdigit()}
    for pid, path in sorted(sockets.items()):
        with contextlib.suppress(psutil_module.Error, OSError):
            process = psutil_module.Process(pid)
            # A hook binds its socket after its process starts; 1 s for the clocks' ticks.
            if process.create_time() > path.stat().st_mtime + 1.0:
                continue
            if process.status() != psutil_module.STATUS_ZOMBIE:
                found.append((pid, process.cmdline() or [process.name()]))
    return found
