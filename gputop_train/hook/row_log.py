"""The hook's own copy of its step rows in the session's recording (launched jobs).

The monitor yields the CPU to the job (monitor/priority.py), so on a busy machine it may read
and record the hook's frames long after they were sent: a monitor killed then lost up to 31 s
of a recording (issue 39). The job's process has the job's priority; its listener thread
appends each batch of rows it sends to the launcher's recording, so what the hook has sent
is on disk within a send period whatever the load. It appends only to a regular file of ours
that the launcher (an ancestor of this process) named, from a descriptor kept out of the
job's way and checked before each write; it stops for good, said once, on any failure or
once that launcher is gone (its recording has ended).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable

from .. import wire
from .listener import held_fd


class RowLog:
    """Appends step rows to ``path``; ``append`` never raises."""

    def __init__(self, path: str, pid: int, launcher: int, tell: Callable[[str], None]) -> None:
        self.path = path
        self.launcher = launcher
        self._pid = pid
        self._tell = tell
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags)  # never created here: the launcher's recorder did
        except OSError as error:
            self._stop(f"cannot open it: {error.strerror or error}")
            return
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            os.close(fd)
            self._stop("not a regular file of ours")
            return
        self._fd = held_fd(fd)
        self._identity = (info.st_dev, info.st_ino)

    @property
    def active(self) -> bool:
        return self._fd is not None

    def append(self, encoded_rows: list[bytes]) -> None:
        """One line of ``encoded_rows`` (the listener's thread, at each send)."""
        if self._fd is None or not encoded_rows:
            return
        if not wire.process_exists(self.launcher):
            self._close()  # the monitor is gone: its recording has ended
            return
        try:
            info = os.fstat(self._fd)
            if (info.st_dev, info.st_ino) != self._identity:
                self._fd = None  # the job closed ours and reused the number: not ours to touch
                self._stop("its descriptor was closed by the job")
                return
            line = memoryview(wire.recorded_steps_line(self._pid, time.time(), encoded_rows))
            while line:
                line = line[os.write(self._fd, line) :]
        except OSError as error:
            self._close()
            self._stop(f"a write failed: {error.strerror or error}")

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) == self._identity:
                    os.close(fd)

    def _stop(self, why: str) -> None:
        self._tell(f"the hook stopped appending its steps to {self.path}: {why}")
