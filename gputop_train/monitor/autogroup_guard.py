"""Holds a terminal session's autogroup lowered for one monitor, and gives the session its
priority back when the monitor is gone, however it went (SIGKILL included), and only when it
was the last monitor of that session.

Run by ``monitor/priority.py`` as ``python -S autogroup_guard.py HOLDERS MUTEX NICE`` in the
monitor's session (an autogroup is per session, and a process can set only its own) but in a
process group of its own (Ctrl+C at the terminal does not reach it). It lowers the autogroup
to ``NICE``, prints ``ok`` (or what failed), then reads its stdin: the monitor holds the other
end, so end-of-file comes when the monitor exits by any means. Every guard of a session holds
a shared lock on ``HOLDERS``; the first one writes the session's nice before the change into
it; a guard that leaves and can then take the lock alone is the last, and restores that nice.
``MUTEX`` orders the guards' short checks. Standard library only: it starts with ``-S``.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time

OWN_AUTOGROUP = "/proc/self/autogroup"
# Without CAP_SYS_ADMIN the kernel refuses an autogroup change within 100 ms of the last one
# on the box (EAGAIN, kernel/sched/autogroup.c): retry for this long.
RETRY_S = 3.0


def current_nice() -> int:
    """The session's autogroup nice ("/autogroup-6 nice 0")."""
    with open(OWN_AUTOGROUP) as handle:
        return int(handle.read().split("nice")[1])


def set_nice(nice: int) -> None:
    """Set the session's autogroup nice, retrying the kernel's rate limit."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            with open(OWN_AUTOGROUP, "w") as handle:
                handle.write(str(nice))
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def join(holders: int, mutex: int, target: int) -> None:
    """Become a holder of the session's yielding; the first holder notes the nice before it.
    A note already there was left by a guard killed with its monitors (SIGKILL of every
    process of ours): it is the session's own nice, kept, and the last holder puts it back."""
    fcntl.flock(mutex, fcntl.LOCK_EX)
    try:
        try:
            fcntl.flock(holders, fcntl.LOCK_EX | fcntl.LOCK_NB)
            first = True
        except BlockingIOError:
            first = False
        if first and not os.pread(holders, 16, 0).strip():
            os.pwrite(holders, str(current_nice()).encode(), 0)
        fcntl.flock(holders, fcntl.LOCK_SH)
        if current_nice() < target:
            set_nice(target)
    finally:
        fcntl.flock(mutex, fcntl.LOCK_UN)


def leave(holders: int, mutex: int) -> int | None:
    """Stop holding; the last holder of the session puts its nice back. Also what any process
    of the session that holds nothing calls to give back a lowering whose holders are all gone
    (``priority.give_back_abandoned``)."""
    fcntl.flock(mutex, fcntl.LOCK_EX)
    try:
        fcntl.flock(holders, fcntl.LOCK_UN)
        try:
            fcntl.flock(holders, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another monitor of this session still runs: it stays lowered
        before = os.pread(holders, 16, 0).decode().strip()
        if before:
            set_nice(int(before))
        os.ftruncate(holders, 0)
        return int(before) if before else None
    finally:
        fcntl.flock(mutex, fcntl.LOCK_UN)


def main(argv: list[str]) -> int:
    os.setpgid(0, 0)  # a process group of our own: Ctrl+C at the terminal is the monitor's
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)  # only the monitor's end-of-file ends us
    holders_path, mutex_path, target = argv[1], argv[2], int(argv[3])
    holders = os.open(holders_path, os.O_RDWR | os.O_CREAT, 0o600)
    mutex = os.open(mutex_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        join(holders, mutex, target)
    except (OSError, ValueError, IndexError) as error:
        print(getattr(error, "strerror", None) or error, flush=True)
        return 1
    print("ok", flush=True)
    while sys.stdin.buffer.read(4096):
        pass
    try:
        leave(holders, mutex)
    except (OSError, ValueError):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
