"""The hook's own copy of its step rows in the session's recording (launched jobs).

The monitor yields the CPU to the job (monitor/priority.py), so on a busy machine it may read
and record the hook's frames long after they were sent: a monitor killed then lost up to 31 s
of a recording (issue 39). The job's process has the job's priority; its listener thread
appends each batch of rows it sends to the launcher's recording, so what the hook has sent
is on disk within a send period whatever the load. It appends only to a regular file of ours
that the launcher (an ancestor of this process) named, from a descriptor kept out of the
job's way and checked before each write; it stops for good, said once, on any failure or
once that launcher is gone (its recording has ended). Stopped while its launcher lives, it
says from which step (``wire.RowsUnrecorded``), and that monitor records the rest itself.
"""

from __future__ import annotations

import contextlib
import os
import resource
import stat
import time
from collections.abc import Callable

from .. import wire
from .listener import held_fd


class RowLog:
    """Appends step rows to ``path``; ``append`` never raises. ``unrecorded_from`` is the
    first step whose row it did not append once it stopped (the monitor records from there;
    issue 46: a read-only mount, RLIMIT_FSIZE or a job that closes its descriptors left the
    recording with a fraction of the steps, or none, and its summary said so)."""

    def __init__(self, path: str, pid: int, launcher: int, tell: Callable[[str], None]) -> None:
        self.path = path
        self.launcher = launcher
        self.unrecorded_from: int | None = None
        self._pid = pid
        self._tell = tell
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags)  # never created here: the launcher's recorder did
        except OSError as error:
            self._stop(f"cannot open it: {error.strerror or error}", 0)
            return
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            os.close(fd)
            self._stop("not a regular file of ours", 0)
            return
        self._fd = held_fd(fd)
        self._identity = (info.st_dev, info.st_ino)

    @property
    def active(self) -> bool:
        return self._fd is not None

    def append(self, first_step: int, encoded_rows: list[bytes]) -> wire.RowsUnrecorded | None:
        """One line of ``encoded_rows`` (the listener's thread, at each send), the first of
        them at step ``first_step``. The frame that says it stopped, the once it does: the
        listener sends it before these rows."""
        if self._fd is None or not encoded_rows:
            return None
        if not wire.process_exists(self.launcher):
            self._close()  # the monitor is gone: its recording has ended
            return None
        line = wire.recorded_steps_line(self._pid, time.time(), encoded_rows)
        try:
            info = os.fstat(self._fd)
        except OSError:
            info = None
        if info is None or (info.st_dev, info.st_ino) != self._identity:
            self._fd = None  # the job closed ours (and may have reused the number): not ours
            return self._stop("its descriptor was closed by the job", first_step)
        room = _size_limit()
        if room is not None and info.st_size + len(line) > room:  # never half a line
            self._close()
            why = f"it would pass this process's file size limit (RLIMIT_FSIZE, {room} bytes)"
            return self._stop(why, first_step)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as error:
            self._close()
            return self._stop(f"a write failed: {error.strerror or error}", first_step)
        return None

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) == self._identity:
                    os.close(fd)

    def _stop(self, why: str, first_step: int) -> wire.RowsUnrecorded:
        self.unrecorded_from = first_step
        self._tell(
            f"the hook stopped appending its steps to {self.path}: {why}; the monitor "
            "records them from here on"
        )
        return wire.RowsUnrecorded(pid=self._pid, from_step=first_step, reason=why)


def _size_limit() -> int | None:
    """The largest file this process may write (RLIMIT_FSIZE), or None for no limit: a write
    past it is cut short mid-line, which would tear the recorder's next line too."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft
