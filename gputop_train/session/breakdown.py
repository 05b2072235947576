"""The step breakdown over a window, and the memory audit: pure functions of step rows and
the hook's ``memory_audit`` fact (docs/steps.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import wire
from .steps import Step

PART_NAMES = ("data", "forward", "backward", "optimizer", "rest")
_COLUMNS = ("part_data_ms", "part_fwd_ms", "part_bwd_ms", "part_opt_ms", "part_rest_ms")


@dataclass(frozen=True)
class StepParts:
    """Each part's share of the split steps' time over a window, in %, and its mean ms per
    step; None where the phase was not observed. The shares add up to 100 (the rest is
    what the others leave)."""

    clock: str  # "gpu" (CUDA events: the GPU's timeline) or "host"
    data_source: str  # "DataLoader" (it fed these steps) or "host gap" (nothing else did)
    steps: int  # the steps split
    pct: dict[str, float | None]  # by PART_NAMES
    ms: dict[str, float | None]  # mean per step, by PART_NAMES
    step_ms: float  # their mean span on that clock (the parts' sum)

    @property
    def observed_pct(self) -> float:
        """data + forward + backward + optimizer: the share the named phases explain."""
        return sum(v for k, v in self.pct.items() if k != "rest" and v is not None)


def step_parts(steps: Sequence[Step]) -> StepParts | None:
    """The breakdown of the steps split on the GPU's clock, else the host's; None when none was
    (no model found, the first step, several optimizers: the step_parts fact says why)."""
    split = [s for s in steps if s.part_clock is not None]
    if not split:
        return None
    # A CUDA job splits one step in a few on the GPU's clock and the others on the host's:
    # the GPU's is the one that says where the step's time goes (docs/steps.md).
    clock = "gpu" if any(s.part_clock == "gpu" for s in split) else "host"
    split = [s for s in split if s.part_clock == clock]
    sums: dict[str, float | None] = {}
    for name, column in zip(PART_NAMES, _COLUMNS, strict=True):
        values = [getattr(s, column) for s in split]
        # A phase missing from some steps (an evaluation pass's data) is shown over the
        # steps that had it, as its share of theirs; never as a 0 for the others.
        known = [v for v in values if v is not None]
        sums[name] = sum(known) / len(known) * len(split) if known else None
    span = sum(v for v in sums.values() if v is not None)
    if span <= 0:
        return None
    return StepParts(
        clock=clock,
        data_source="DataLoader" if any(s.data_ms is not None for s in split) else "host gap",
        steps=len(split),
        pct={k: None if v is None else 100.0 * v / span for k, v in sums.items()},
        ms={k: None if v is None else v / len(split) for k, v in sums.items()},
        step_ms=span / len(split),
    )


def host_gap_pct(steps: Sequence[Step]) -> float | None:
    """The host's time outside the phases before each forward, % of step time: the
    data-wait of a loop without a DataLoader (memmap get_batch, tokenizing in the loop)."""
    timed = [s for s in steps if s.host_gap_ms is not None and s.step_ms]
    total = sum(s.step_ms or 0.0 for s in timed)
    if not timed or total <= 0:
        return None
    return min(100.0, 100.0 * sum(s.host_gap_ms or 0.0 for s in timed) / total)


def activations(audit: wire.MemoryAudit) -> int | None:
    """The allocated peak's rest: activations and temporaries (the peak less what persists:
    parameters, gradients, optimizer state); None where one is not known."""
    persistent = (audit.params_bytes, audit.grads_bytes, audit.optimizer_bytes)
    if audit.allocated_peak is None or None in persistent:
        return None
    return max(0, audit.allocated_peak - sum(b or 0 for b in persistent))


def cache(audit: wire.MemoryAudit) -> int | None:
    """What the allocator reserved beyond its allocated peak (its cache, fragmentation)."""
    if audit.reserved_peak is None or audit.allocated_peak is None:
        return None
    return max(0, audit.reserved_peak - audit.allocated_peak)
