"""The step rows a monitor reads, and those still waiting on their GPU work.

A row is finished on the training thread with what the host knows; its GPU time, its
collectives' wait on the streams and its model columns come from CUDA events that complete
later, so the row waits here, in step order, until its events have run (polled, never
synchronised) and then joins the ring. The ring is bounded (``RING_STEPS``) so that a monitor
attaching late still gets history, and the listener's thread reads it from its newest end.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .. import wire
from .collectives import CollectiveClock, read_pairs
from .cuda_timer import CudaStepTimer
from .model_probe import MODEL_COLUMNS, ModelColumns, ModelProbe, StepCounts

# Enough history for a monitor that attaches minutes late, at a few KB per 100 steps.
RING_STEPS = 8192
# Steps whose GPU time is still outstanding; past this the GPU is hopelessly behind.
MAX_STEPS_AWAITING_GPU = 256

_STEP, _GPU_MS, _COMM_MS = (wire.COLUMN[name] for name in ("step", "gpu_ms", "comm_ms"))


class StepRing:
    """Finished rows (``rows``, oldest first) and the rows awaiting their GPU times."""

    __slots__ = ("_awaiting", "_awaiting_counts", "_comm_pairs", "_timer", "_torch", "rows")

    def __init__(self, torch_module: Any, steps: int = RING_STEPS) -> None:
        self._torch = torch_module
        self.rows: deque[list[Any]] = deque(maxlen=steps)
        self._timer: CudaStepTimer | None = None  # made at the first step that uses CUDA
        self._comm_pairs: dict[int, list[Any]] = {}  # step -> CUDA event pairs still to read
        self._awaiting: deque[list[Any]] = deque()
        self._awaiting_counts: deque[StepCounts] = deque()  # beside _awaiting, in step

    def mark_start(self) -> None:
        """The step's first batch: where its GPU time starts, if it is timed."""
        if self._timer is not None:
            self._timer.mark_start()

    def comm_ms(self, clock: CollectiveClock | None, step: int) -> float | None:
        """The step's wait in collectives: the host's now; the streams' once its events ran."""
        if clock is None or not clock.enabled:
            return None
        host_ms, pairs = clock.take_step()
        if pairs:
            self._comm_pairs[step] = pairs
        return host_ms

    def finish(self, row: list[Any], counts: StepCounts, cuda: bool, model: ModelProbe) -> None:
        """Keep the step's ``row`` (its model columns from ``counts``), at once on a CPU
        job, else after the step's GPU work has run."""
        if self._timer is None and cuda:
            self._timer = CudaStepTimer(self._torch)
        if self._timer is None:
            _fill(row, model.row(counts, resolved=True))
            self.rows.append(row)
            return
        # A step not timed still gets its end event where a figure waits on its GPU work.
        masks = counts.masks is not None and bool(counts.masks.pending)
        needs_end = masks or row[_STEP] in self._comm_pairs
        self._timer.mark_end(time_next=counts.gpu_next, needs_end=needs_end)
        self._awaiting.append(row)
        self._awaiting_counts.append(counts)
        self.collect(model)
        while len(self._awaiting) > MAX_STEPS_AWAITING_GPU:
            self._timer.drop_oldest()
            dropped = self._take_awaiting(False, model)
            if self._comm_pairs.pop(dropped[_STEP], None):
                dropped[_COMM_MS] = None  # its streams' wait is not read
            self.rows.append(dropped)

    def collect(self, model: ModelProbe) -> None:
        """The rows whose GPU work has run, into the ring with their GPU figures."""
        if self._timer is None:
            return
        for gpu_ms in self._timer.poll():
            row = self._take_awaiting(True, model)
            row[_GPU_MS] = gpu_ms
            pairs = self._comm_pairs.pop(row[_STEP], None)
            if pairs:
                # The step's end event ran, so the collectives it waited on have too.
                stream_ms = read_pairs(pairs)
                host_ms = row[_COMM_MS]
                row[_COMM_MS] = None if stream_ms is None else (host_ms or 0.0) + stream_ms
            self.rows.append(row)

    def flush(self, model: ModelProbe) -> None:
        """At exit: every row into the ring, those whose GPU work has not run without it."""
        if self._timer is None:
            return
        self.collect(model)
        while self._awaiting:
            self.rows.append(self._take_awaiting(False, model))

    def _take_awaiting(self, resolved: bool, model: ModelProbe) -> list[Any]:
        """The oldest row awaiting the GPU, with its model columns (N/A if not resolved)."""
        row = self._awaiting.popleft()
        _fill(row, model.row(self._awaiting_counts.popleft(), resolved))
        return row

    def rows_after(self, step: int) -> list[list[Any]]:
        """Finished rows with a step number above ``step``, oldest first (listener thread).
        The ring is in step order, so this walks back from its newest row and costs what is
        new, not the ring: copying and filtering the whole ring, once it held its 8192 rows,
        held the GIL for ~1.4 ms a send (the hook's thread 0.06% -> 0.34% of a core after 3
        minutes, dev box, 2026-11-24; git show 6a2d3ea:benchmarks/overhead/attach_toggle.py
        --pause, docs/benchmarks.md section 10)."""
        for _ in range(3):
            newer = []
            try:
                for row in reversed(self.rows):
                    if row[_STEP] <= step:
                        break
                    newer.append(row)
            except RuntimeError:  # the ring moved under us; try again
                continue
            newer.reverse()
            return [_resolved(row) for row in newer]
        return []


def _fill(row: list[Any], model_columns: list[Any] | ModelColumns) -> None:
    """Hold the model's columns (``MODEL_COLUMNS``, the last of STEP_FIELDS) as one item at
    their place; ``_resolved`` puts them in their columns when the row is read."""
    row.append(model_columns)


def _resolved(row: list[Any]) -> list[Any]:
    """The row with the model's columns in place (the hook's thread, when a monitor reads
    it: the training thread only took the marks). In place, so it is done once a row."""
    if len(row) == _MODEL_AT + 1:
        held = row[_MODEL_AT]
        row[_MODEL_AT:] = held.columns() if isinstance(held, ModelColumns) else held
    return row


# Where the model's columns start: they close STEP_FIELDS, after the columns the agent fills.
_MODEL_AT = wire.COLUMN[MODEL_COLUMNS[0]]
assert wire.STEP_FIELDS[_MODEL_AT:] == MODEL_COLUMNS
