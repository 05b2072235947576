"""Each GPU's clocks and NVML clock-event (throttle) reasons over a window.

A GPU held under its clock ceiling by heat or power does less per second: on one rank of a
job it makes that rank the straggler; on every GPU it slows the whole job.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..samples import GpuSample

# The reasons that slow a GPU below what the job asked of it (NVML's clock-event reasons).
# app_clocks, sync_boost and display_clocks are settings, not slowdowns; gpu_idle is left
# out by the sampler.
SLOWDOWN_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


@dataclass(frozen=True)
class GpuClocks:
    """One GPU over a window: its SM clock and how often each slowdown reason was in force."""

    index: int
    samples: int  # samples that read the reasons
    sm_clock_mhz: float | None  # mean over the window
    sm_clock_max_mhz: float | None
    # reason -> share of the samples (0..1) in which NVML reported it
    reasons: tuple[tuple[str, float], ...]

    @property
    def clock_ratio(self) -> float | None:
        """The mean SM clock as a share of its ceiling."""
        if not self.sm_clock_mhz or not self.sm_clock_max_mhz:
            return None
        return self.sm_clock_mhz / self.sm_clock_max_mhz

    def share(self, reason: str) -> float:
        return dict(self.reasons).get(reason, 0.0)


def gpu_clocks(ticks: Sequence[tuple[GpuSample, ...]]) -> tuple[GpuClocks, ...]:
    """Per GPU, in index order; GPUs whose clocks and reasons NVML never gave are left out."""
    by_index: dict[int, list[GpuSample]] = {}
    for tick in ticks:
        for gpu in tick:
            by_index.setdefault(gpu.index, []).append(gpu)
    found = []
    for index, samples in sorted(by_index.items()):
        read = [g for g in samples if g.throttle is not None]
        clocks = [g.sm_clock_mhz for g in samples if g.sm_clock_mhz is not None]
        ceiling = next((g.sm_clock_max_mhz for g in reversed(samples) if g.sm_clock_max_mhz), None)
        if not read and not clocks:
            continue
        reasons = tuple(
            (reason, sum(reason in (g.throttle or ()) for g in read) / len(read))
            for reason in SLOWDOWN_REASONS
            if read and any(reason in (g.throttle or ()) for g in read)
        )
        found.append(
            GpuClocks(
                index=index,
                samples=len(read),
                sm_clock_mhz=statistics.fmean(clocks) if clocks else None,
                sm_clock_max_mhz=ceiling,
                reasons=reasons,
            )
        )
    return tuple(found)
