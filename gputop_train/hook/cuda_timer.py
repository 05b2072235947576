"""GPU time per step from CUDA events, read later so the training thread never synchronizes."""

from __future__ import annotations

from collections import deque
from typing import Any


class CudaStepTimer:
    """Brackets each step with two CUDA events and reports their elapsed time once both ran.

    ``mark_start`` is called when the step's first batch arrives (so the GPU's idle time while
    the CPU waits for data is not counted); a step with no batch starts where the previous
    one ended. ``poll`` only asks ``Event.query()``, which never blocks.
    """

    def __init__(self, torch_module: Any) -> None:
        self._cuda = torch_module.cuda
        self._start: Any = None
        self._previous_end: Any = None
        self._pending: deque[tuple[Any, Any]] = deque()
        self._free: list[Any] = []  # events whose times were read: reused, not re-created

    def _record(self) -> Any:
        event = self._free.pop() if self._free else self._cuda.Event(enable_timing=True)
        event.record()
        return event

    def _recycle(self, event: Any) -> None:
        """Free an event nobody will read again (a step with no batch starts at the last end)."""
        if event is self._previous_end or event is self._start:
            return
        if any(event is a or event is b for a, b in self._pending):
            return
        self._free.append(event)

    def mark_start(self) -> None:
        if self._start is None:
            self._start = self._record()

    def mark_end(self) -> None:
        end = self._record()
        start = self._start or self._previous_end
        if start is not None:
            self._pending.append((start, end))
        else:
            self._pending.append((end, end))  # first step: nothing to bracket it with
        self._start = None
        self._previous_end = end

    def poll(self) -> list[float | None]:
        """GPU milliseconds of the oldest steps whose end event has completed, in order."""
        done: list[float | None] = []
        while self._pending and self._pending[0][1].query():
            start, end = self._pending.popleft()
            done.append(None if start is end else start.elapsed_time(end))
            self._recycle(start)
            if end is not start:
                self._recycle(end)
        return done

    @property
    def pending(self) -> int:
        return len(self._pending)

    def drop_oldest(self) -> None:
        """Give up on the oldest step (the GPU is far behind; its time will read N/A)."""
        if self._pending:
            self._pending.popleft()
