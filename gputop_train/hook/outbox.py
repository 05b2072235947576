"""What the hook has to tell the monitors, between the training thread and the listener's.

The training thread finds facts (a loader's settings, a sync scan, the FLOPs) and says
notices; it must never encode or block on a socket, so it only appends here, and the
listener's thread takes the frames at each send. A fact reaches each monitor exactly once: a
monitor's hello carries only the facts already taken for the others (the latest of each
kind), and every later one goes out in a frame after it. Notices wait, bounded, for the first
monitor to connect.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import deque
from typing import Any

from .. import wire

# Facts waiting for the listener's next send (it takes them twice a second).
PENDING_FACTS = 256
# Notices kept for a monitor that has not connected yet: the newest, a line each.
PENDING_NOTICES = 64


class Outbox:
    """Facts and notices from the training thread, taken by the listener's thread."""

    __slots__ = ("_facts", "_latest", "_lock", "notices")

    def __init__(self) -> None:
        self.notices: deque[str] = deque(maxlen=PENDING_NOTICES)
        self._facts: deque[wire.Frame] = deque(maxlen=PENDING_FACTS)
        self._latest: dict[str, dict[str, Any]] = {}  # fact type -> the last one taken
        self._lock = threading.Lock()  # held briefly: both threads touch the facts

    def publish(self, fact: wire.Frame) -> None:
        """Send a fact now, and keep the latest of its kind for monitors that come later."""
        with self._lock:
            self._facts.append(fact)

    def notice(self, text: str) -> None:
        """A line for the monitors (the caller says it elsewhere if it must)."""
        self.notices.append(text)

    def say(self, text: str) -> None:
        """Tell the monitors (a notice) and the job's log (stderr)."""
        self.notices.append(text)
        to_log(f"gputop-train: {text}")

    def take(self, pid: int, connected: bool) -> list[bytes]:
        """The facts waiting, oldest first, and with a monitor ``connected`` the notices
        after them (listener thread)."""
        with self._lock:
            taken = list(self._facts)
            self._facts.clear()
            for fact in taken:
                self._latest[fact.TYPE] = fact.fields()
        frames = [fact.encode() for fact in taken]
        if connected:
            while self.notices:
                frames.append(wire.Notice(self.notices.popleft(), pid=pid).encode())
        return frames

    def latest(self) -> list[dict[str, Any]]:
        """The latest fact of each kind already taken: a new monitor's hello carries them."""
        with self._lock:
            return list(self._latest.values())


def to_log(text: str) -> None:
    """A line on the job's stderr, which may be closed or full: never raises."""
    with contextlib.suppress(Exception):
        print(text, file=sys.stderr, flush=True)
