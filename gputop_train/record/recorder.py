"""Append-only JSONL recording of a session, written as it happens.

The session calls ``record(kind, payload)`` from whichever thread wrote to it; lines are
buffered and a background thread appends them to the file at least once a second, so a
monitor killed outright loses at most the last second. Format: docs/recording.md.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
FLUSH_PERIOD_S = 0.5  # the bar is once a second; half of it leaves margin


class Recorder:
    def __init__(
        self, path: Path, meta: dict[str, Any], clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._stop = threading.Event()
        self.record("meta", {"format": FORMAT_VERSION, **meta})
        self._flush()
        self._thread = threading.Thread(target=self._run, name="gputop-train-recorder", daemon=True)
        self._thread.start()

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Queue one line (any thread). Values that JSON cannot hold become strings."""
        line = json.dumps({"kind": kind, "t": self._clock(), **payload}, default=str)
        with self._lock:
            self._pending.append(line)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._flush()
        self._file.close()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_PERIOD_S):
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            lines, self._pending = self._pending, []
        if lines and not self._file.closed:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
