"""Each GPU's window figures, kept between the calls that ask for the same window (issue 47
point 7). A snapshot reads one GPU's window up to four times (the per-GPU figures, the job's
figures, and both again in the advisor's observation) and the findings thread asks for it
again: on the fake node of 8 GPUs that was half of ``Session.snapshot``. Samples are
immutable, so a window's figures are a function of which sample objects it holds; it is
computed once per new window, which comes with each NVML tick. ``Session`` holds one and
calls it under its own lock; nothing here locks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..samples import GpuSample
from . import gpu_table

# The windows kept per GPU: the snapshot's, the observation's, the findings thread's and
# the phase rows', with one to spare.
KEEP_PER_GPU = 5


class GpuWindows:
    """``gpu_table.over_window`` (every row) of the windows asked last, per GPU, by the
    identity of the samples each holds. A kept entry holds its samples, so their ids stay
    theirs while it is kept."""

    def __init__(self) -> None:
        self._kept: dict[int, dict[tuple[int, ...], _Entry]] = {}
        self.computed = 0  # windows computed, not found kept (tests read it)

    def __call__(self, samples: Sequence[GpuSample]) -> Mapping[str, Any]:
        """One GPU's figures over ``samples`` (oldest first); read only."""
        if not samples:
            return gpu_table.over_window(samples)
        kept = self._kept.setdefault(samples[0].index, {})
        key = tuple(map(id, samples))
        found = kept.pop(key, None)
        if found is None:
            held = tuple(samples)
            found = (held, gpu_table.over_window(held))
            self.computed += 1
        kept[key] = found  # the newest last: the oldest goes first
        if len(kept) > KEEP_PER_GPU:
            del kept[next(iter(kept))]
        return found[1]


_Entry = tuple[tuple[GpuSample, ...], Mapping[str, Any]]
