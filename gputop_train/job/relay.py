"""The job's output, from a pipe to its log file, in a process of its own.

The job never writes to a file or a terminal we own: its stdout and stderr are a pipe read by
this relay, started in the job's session beside it. The relay outlives the monitor (a lost
terminal, a SIGKILL of the monitor) and never makes a write of the job fail: when the log's
disk is full or failing, it drops what it cannot write, counts it, says so in the log once
it can, and keeps reading. It ends when the job (and every child that shares the pipe) has
closed it.

    python -m gputop_train.job.relay LOG_FD < pipe      (started by job/launched.py)
"""

from __future__ import annotations

import os
import signal
import sys

CHUNK_BYTES = 65536


def relay(source: int, log: int) -> int:
    """Copy ``source`` to ``log`` until end of file; the bytes it had to drop."""
    dropped = 0
    while True:
        try:
            data = os.read(source, CHUNK_BYTES)
        except InterruptedError:
            continue
        if not data:
            return dropped
        if dropped:
            note = f"\n[gputop-train: {dropped} bytes of output lost: log not writable]\n"
            if _write_all(log, note.encode()):
                dropped = 0
        if not _write_all(log, data):
            dropped += len(data)


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # ENOSPC, EIO, EFBIG: never the job's problem
            return False
        view = view[written:]
    return True


def main() -> int:
    # A hang-up, Ctrl+C to the job's group or a closed pipe must not stop the relay before
    # the job: it ends at end of file, when the job is done writing.
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    relay(sys.stdin.fileno(), int(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
