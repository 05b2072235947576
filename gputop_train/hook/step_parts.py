"""Each optimizer step's wall time split into data, forward, backward, optimizer and the rest.

The training thread leaves a mark at each phase boundary: one host clock read and, on a
sampled CUDA step, one pooled CUDA event. Consecutive marks bound one interval, named by
the pair of marks around it. The host split is computed when a monitor reads the step's
row (the hook's thread); the GPU split once the step's last event has run, read with
``Event.query()`` and ``elapsed_time`` only, never a sync (docs/steps.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

FWD_START, FWD_END, BWD_START, BWD_END, OPT_START, STEP_END, HOOK_END = range(7)
_KINDS = 7

# The part of the interval between two marks, by (earlier mark, later mark); any other pair
# is the rest (a loss computed outside the model, gradient clipping, a GradScaler's checks).
_NAMED = {
    (STEP_END, FWD_START): 0,  # data: the end of the last step to this forward
    (BWD_END, FWD_START): 0,  # data: the next micro-batch's fetch under accumulation
    (HOOK_END, FWD_START): 0,  # data, after the hook's own work at the step's end
    (FWD_START, FWD_END): 1,
    (BWD_START, BWD_END): 2,
    (OPT_START, STEP_END): 3,
}
_REST = 4
# The same as a flat table, indexed earlier * _KINDS + later: one list lookup an interval.
# The hook's own work at a step's end (STEP_END -> HOOK_END) is rest, never data.
_PART_OF = [_NAMED.get((a, b), _REST) for a in range(_KINDS) for b in range(_KINDS)]


@dataclass(frozen=True, slots=True)
class Parts:
    """One step's parts in milliseconds on one clock; None where the phase was not seen."""

    clock: str | None  # "gpu" (CUDA events: the GPU's timeline), "host"; None: not split
    data: float | None
    fwd: float | None
    bwd: float | None
    opt: float | None
    rest: float | None

    def row(self) -> list[Any]:
        return [self.data, self.fwd, self.bwd, self.opt, self.rest, self.clock]


EMPTY_ROW: list[Any] = [None, None, None, None, None, None]


def split(kinds: list[int], durations_ms: list[float], clock: str, clean_data: bool) -> Parts:
    """Sum each interval into its part. ``durations_ms[i]`` is the time from mark i-1 to
    mark i. The step is split only when it starts at the previous step's end and saw a
    forward; ``clean_data`` False (an evaluation forward ran in the gap) moves the data
    interval to the rest, and data reads N/A."""
    if len(kinds) < 2 or kinds[0] != STEP_END or kinds[-1] != STEP_END or FWD_START not in kinds:
        return _UNSPLIT
    sums = [0.0, 0.0, 0.0, 0.0, 0.0]
    previous = STEP_END
    for kind, duration in zip(kinds[1:], durations_ms[1:], strict=True):
        sums[_PART_OF[previous * _KINDS + kind]] += duration
        previous = kind
    return _parts(clock, sums, sum(1 << kind for kind in set(kinds)), clean_data)


_UNSPLIT = Parts(None, None, None, None, None, None)


def _parts(clock: str, sums: list[float], seen: int, clean_data: bool) -> Parts:
    """The parts from the intervals' sums; ``seen`` has bit k set for a mark of kind k."""
    if not clean_data:
        sums[_REST] += sums[0]
    return Parts(
        clock,
        data=sums[0] if clean_data else None,
        fwd=sums[1],
        bwd=sums[2] if seen & 1 << BWD_END else None,
        opt=sums[3] if seen & 1 << OPT_START else None,
        rest=sums[_REST],
    )


@dataclass(slots=True)
class PendingStep:
    """One finished step's marks as taken, (kind, perf_counter, CUDA event or None) each:
    split later, off the training thread (``host``), or on the GPU's clock once its events
    ran (``StepTimeline.resolve``)."""

    marks: list[tuple[int, float, Any]]
    clean_data: bool  # no evaluation forward ran in the step's gap
    events: bool  # every mark but the hook's end carries a CUDA event (a sampled step)

    def host(self) -> Parts:
        """The split on the host's clock (its data part is the step's host gap), as ``split``
        makes it, in one pass over the marks: the listener's thread splits every row it
        sends, ~450 a second of a 2.2 ms step, and the lists ``split`` takes cost it twice
        this (9.3 us a row, dev box, 2026-12-06; issue 46, docs/benchmarks.md section 16)."""
        marks = self.marks
        first, last = marks[0][0] if marks else None, marks[-1][0] if marks else None
        if len(marks) < 2 or first != STEP_END or last != STEP_END:
            return _UNSPLIT
        sums = [0.0, 0.0, 0.0, 0.0, 0.0]
        seen = 0  # bit k: a mark of kind k
        previous, then = STEP_END, marks[0][1]
        for kind, at, _ in marks[1:]:
            sums[_PART_OF[previous * _KINDS + kind]] += (at - then) * 1000.0
            previous, then = kind, at
            seen |= 1 << kind
        if not seen & 1 << FWD_START:
            return _UNSPLIT
        return _parts("host", sums, seen, self.clean_data)


class StepTimeline:
    """The marks of the current step; one instance per training process. A mark is a
    clock read and an append (and, on a sampled CUDA step, an event's record): whatever
    can wait is done when the step's row is resolved, not here."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._marks: list[tuple[int, float, Any]] = []
        self._free: list[Any] = []
        self._recorded = False  # an event was recorded at a mark of the open step
        self.eval_forward = False  # a forward without grad (evaluation) ran within the step
        self.cuda = False  # record CUDA events at this step's marks (a sampled CUDA step)

    def mark(self, kind: int) -> None:
        if self.cuda:
            event = self._free.pop() if self._free else self._torch.cuda.Event(enable_timing=True)
            event.record()
            self._recorded = True
            self._marks.append((kind, time.perf_counter(), event))
        else:
            self._marks.append((kind, time.perf_counter(), None))

    def end_step(self, cuda_next: bool = False) -> PendingStep:
        """Close the step with its end mark; the next step starts at this mark, and records
        CUDA events at its marks when ``cuda_next`` (a step split on the GPU's clock)."""
        self.cuda = self.cuda or cuda_next  # the end mark opens the next step too
        self.mark(STEP_END)
        self.cuda = cuda_next
        marks = self._marks
        last = marks[-1]
        self._marks = [last]
        clean, self.eval_forward = not self.eval_forward, False
        with_events = False
        if self._recorded:  # a CUDA step near a sampled one: its events are read or go back
            with_events = all(e is not None for k, _, e in marks if k != HOOK_END)
            if not with_events:
                self.recycle([e for _, _, e in marks[:-1]])
            self._recorded = last[2] is not None
        return PendingStep(marks, clean, with_events)

    def mark_hook_end(self) -> None:
        """The hook's own work at the step's end is done (host clock only: no GPU work)."""
        self._marks.append((HOOK_END, time.perf_counter(), None))

    def resolve(self, pending: PendingStep) -> Parts:
        """The GPU split of a step whose last event has run (``ready``). Frees its events
        but the last (the next step's first)."""
        # The hook-end mark has no event (nothing ran on the GPU): the GPU's split skips it.
        marked = [(k, e) for k, _, e in pending.marks if e is not None]
        kinds = [k for k, _ in marked]
        events = [e for _, e in marked]
        try:
            # "Ran" came from the step timer's own event: a mark recorded after it may not
            # have run yet, and elapsed_time raises then (it disabled the hook on the H100's
            # fast loop, 2026-11-24): that step is split on the host's clock instead.
            if not all(e.query() for e in events):
                return pending.host()
            durations = [0.0] + [
                events[i - 1].elapsed_time(events[i]) for i in range(1, len(events))
            ]
        except RuntimeError:
            return pending.host()
        finally:
            self.recycle(events[:-1])
        return split(kinds, durations, "gpu", pending.clean_data)

    def drop(self, pending: PendingStep) -> None:
        """Give up on a step's GPU split (the GPU is far behind): its events go back."""
        if pending.events:
            self.recycle([e for _, _, e in pending.marks[:-1]])

    def recycle(self, events: list[Any]) -> None:
        """Return events nobody reads again; the current step's first mark is kept."""
        keep = self._marks[0][2] if self._marks else None
        self._free.extend(e for e in events if e is not None and e is not keep)
