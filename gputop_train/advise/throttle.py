"""A GPU that runs throttled: held under its clock ceiling by heat or power (NVML)."""

from __future__ import annotations

from .. import format as fmt
from ..session.clocks import GpuClocks

# A reason in force in half the window's samples is the GPU's state, not a blip: NVML is read
# once a second (collect/nvml.py MEDIUM_PERIOD_S), and a transient boost-clock dip lasts less.
THROTTLED_SHARE = 0.5
# The power cap is where a GPU at full load normally sits (an H100 or H200 at its 700 W limit
# reports sw_power_cap while its SM clock stays within a few % of its ceiling). It is called
# throttling only when the clock is this far under its ceiling: 10% less work per second.
POWER_CAP_CLOCK_RATIO = 0.9
# Reasons that are never a GPU's normal state under load: heat and hardware slowdowns.
HARD_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
MIN_SAMPLES = 3


def throttled(clocks: GpuClocks) -> tuple[str, ...]:
    """The reasons that hold this GPU back over the window ((): none do)."""
    if clocks.samples < MIN_SAMPLES:
        return ()
    hard = tuple(r for r in HARD_REASONS if clocks.share(r) >= THROTTLED_SHARE)
    ratio = clocks.clock_ratio
    capped = (
        clocks.share("sw_power_cap") >= THROTTLED_SHARE
        and ratio is not None
        and ratio < POWER_CAP_CLOCK_RATIO
    )
    return hard + (("sw_power_cap",) if capped else ())


def evidence_line(c: GpuClocks, reasons: tuple[str, ...]) -> str:
    shares = ", ".join(f"{r} in {c.share(r):.0%} of samples" for r in reasons)
    clock = (
        f"SM clock {c.sm_clock_mhz:.0f} MHz of its {c.sm_clock_max_mhz:.0f} MHz ceiling"
        if c.sm_clock_mhz and c.sm_clock_max_mhz
        else f"SM clock {fmt.NA}"
    )
    return f"GPU {c.index}: {shares}; {clock} (NVML)"
