"""Append-only JSONL recording of a session, written as it happens.

The session calls ``record_event(event)`` from whichever thread wrote to it; lines are
buffered and a background thread appends them to the file at least once a second, so a
monitor killed outright loses at most the last second (a machine that goes down, at most the
last FSYNC_PERIOD_S). Format: docs/recording.md.

The recorder degrades, never dies: when the disk is full or failing it stops recording,
says so once (``on_failure``), drops what it has not written and every later line (its
memory stays bounded), and what it wrote stays readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import events
from .files import create_private, describe_os_error

FORMAT_VERSION = 1
FLUSH_PERIOD_S = 0.5  # the bar is once a second; half of it leaves margin
# What is written survives the monitor's death (the kernel holds it); fsync only guards
# against the machine going down, and each one blocks on the disk: the recorder thread woke
# 10 times a second with an fsync every flush (tui_cost.py --threads, dev box, 2026-11-24).
FSYNC_PERIOD_S = 10.0
# Lines waiting for the writer beyond this are dropped (a stalled disk): ~10 s of a busy run.
MAX_PENDING_LINES = 100_000


class Recorder:
    """Raises OSError (with the file's name) when the recording cannot be created at all."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        clock: Callable[[], float] = time.time,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self._clock = clock
        self._on_failure = on_failure
        # Appending: the job's hooks append their step rows to it too (hook/row_log.py).
        self._fd = create_private(path, append=True)
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self.failed: str | None = None  # why recording stopped
        self.dropped_lines = 0
        self.renamed_from: Path | None = None  # the path it had, if moved while recording
        self._stop = threading.Event()
        self._synced_at = 0.0  # monotonic time of the last fsync: the first flush syncs
        self.record("meta", {"format": FORMAT_VERSION, **meta})
        self._flush()
        self._thread = threading.Thread(target=self._run, name="gputop-train-recorder", daemon=True)
        self._thread.start()

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Queue one line (any thread). Values that JSON cannot hold become strings."""
        line = json.dumps({"kind": kind, "t": self._clock(), **payload}, default=str)
        with self._lock:
            if self.failed is not None or len(self._pending) >= MAX_PENDING_LINES:
                self.dropped_lines += 1
                return
            self._pending.append(line)

    def record_event(self, item: events.Event) -> None:
        """Queue one event's line (the session's listener): its kind and fields, as the
        events registry names them."""
        self.record(*events.encode(item))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._flush(sync=True)
        self._follow_rename()
        os.close(self._fd)

    def _follow_rename(self) -> None:
        """Where the file is now: renamed while recording (``mv``), the closing lines and the
        summaries name its new path; deleted, ``failed`` says so."""
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(self._fd), os.stat(self.path)):
                return
        try:  # Linux: the open file's current name
            now = os.readlink(f"/proc/self/fd/{self._fd}")
        except OSError:
            return
        if now.endswith(" (deleted)"):
            self.failed = self.failed or f"{self.path} was deleted while recording"
        else:
            self.renamed_from, self.path = self.path, Path(now)

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_PERIOD_S):
            self._flush()

    def _flush(self, sync: bool = False) -> None:
        """Append what is pending; fsync at most every FSYNC_PERIOD_S, or when ``sync``."""
        with self._lock:
            lines, self._pending = self._pending, []
        if not lines or self.failed is not None:
            return
        data = ("\n".join(lines) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            now = time.monotonic()
            if sync or now - self._synced_at >= FSYNC_PERIOD_S:
                os.fsync(self._fd)
                self._synced_at = now
        except OSError as error:
            self._fail(describe_os_error(error, self.path), len(lines))

    def _fail(self, reason: str, lost: int) -> None:
        with self._lock:
            self.failed = reason
            self.dropped_lines += lost + len(self._pending)
            self._pending = []
        if self._on_failure is not None:
            self._on_failure(f"recording stopped: {reason}; what was written stays readable")
