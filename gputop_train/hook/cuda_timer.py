"""GPU time per step from CUDA events, read later so the training thread never synchronizes.

Not every step is timed: an event's record cost the H100's ~2 ms launch-bound loop ~110 us a
step under line_profiler (2026-11-25; 6.4 us at the timeit minimum), the largest part of the
hook's step end. The agent times the steps the model probe splits on the GPU's clock
(model_probe.GPU_SPLIT_PERIOD_S: at most one each 50 ms, every step of a loop of 50 ms steps
or more), so a split step is always a timed one; the GPU time share is read over the timed
steps (session/stats.py). A step whose figures wait on its GPU work (mask token counts,
collectives' events) gets its end event all the same.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class CudaStepTimer:
    """Brackets chosen steps with two CUDA events and reports their elapsed time once both ran.

    ``mark_start`` is called when the step's first batch arrives (so the GPU's idle time while
    the CPU waits for data is not counted); a step with no batch starts where the previous
    one ended. ``poll`` only asks ``Event.query()``, which never blocks; it reports every step
    in order, None for a step not timed.
    """

    def __init__(self, torch_module: Any) -> None:
        self._cuda = torch_module.cuda
        self._timing = True  # the current step is timed (the first one is)
        self._start: Any = None
        self._previous_end: Any = None  # the last step's end, where it opens a timed step
        # (start, end) per step in order: (None, None) when no event waits on the GPU
        self._pending: deque[tuple[Any, Any]] = deque()
        self._free: list[Any] = []  # events whose times were read: reused, not re-created

    def _record(self) -> Any:
        event = self._free.pop() if self._free else self._cuda.Event(enable_timing=True)
        event.record()
        return event

    def _recycle(self, event: Any) -> None:
        """Free an event nobody will read again (a step with no batch starts at the last end)."""
        if event is None or event is self._previous_end or event is self._start:
            return
        if any(event is a or event is b for a, b in self._pending):
            return
        self._free.append(event)

    def mark_start(self) -> None:
        if self._timing and self._start is None:
            self._start = self._record()

    def mark_end(self, time_next: bool = True, needs_end: bool = False) -> None:
        """The step ends. ``time_next``: time the coming step; ``needs_end``: this step's
        figures wait on its GPU work, so its end is recorded even when it is not timed."""
        start = (self._start or self._previous_end) if self._timing else None
        end = self._record() if start is not None or time_next or needs_end else None
        if end is None:
            self._pending.append((None, None))  # nothing to wait for, nothing to read
        else:
            self._pending.append((start, end) if start is not None else (end, end))
        self._start = None
        self._previous_end = end if time_next else None
        self._timing = time_next

    def poll(self) -> list[float | None]:
        """GPU milliseconds of the oldest steps whose end event has completed, in order (None
        for a step not timed)."""
        done: list[float | None] = []
        while self._pending:
            start, end = self._pending[0]
            if end is not None and not end.query():
                break
            self._pending.popleft()
            done.append(None if end is None or start is end else start.elapsed_time(end))
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
