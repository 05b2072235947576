"""A process in a pseudo-terminal, as over SSH: the one harness of the tests that need one."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .paths import REPO


class Terminal:
    """``command`` on the slave end of a ``rows`` x ``cols`` pty, in a session of its own; the
    test holds the master end: it reads what the process writes and types keys."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        rows: int = 24,
        cols: int = 80,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
    ) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.process = subprocess.Popen(
            list(command), cwd=cwd, env=env, start_new_session=True,
            stdin=slave, stdout=slave, stderr=slave,
        )  # fmt: skip
        os.close(slave)
        self.output = bytearray()
        self._open = True

    def read(self, duration_s: float, until: bytes | None = None) -> None:
        """Keep what the process writes for ``duration_s``, or until ``until`` is in it or the
        process has ended (a pty nobody reads fills, and blocks the process's writes)."""
        deadline = time.monotonic() + duration_s
        while (left := deadline - time.monotonic()) > 0 and self.process.poll() is None:
            if until is not None and until in self.output:
                return
            if select.select([self.master], [], [], min(left, 0.2))[0] and not self._take():
                return

    def drain(self) -> None:
        """Keep what is there to read now, without waiting."""
        while select.select([self.master], [], [], 0)[0] and self._take():
            pass

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def hang_up(self) -> None:
        """Close the master end, as a dropped SSH connection does: writes to the terminal
        fail from now on."""
        if self._open:
            self._open = False
            os.close(self.master)

    def close(self) -> None:
        """Kill the process if it still runs, reap it, and close the master end."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.hang_up()

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def _take(self) -> bool:
        with contextlib.suppress(OSError):
            self.output.extend(os.read(self.master, 65536))
            return True
        return False
