"""Syncs rules: host-device syncs in the step (many, or one or two while the GPU idles), with
what removing them can gain at most."""

from __future__ import annotations

from ... import format as fmt
from ...session.stats import Observation
from .finding import Change, Finding
from .window import GPU_BUSY_SM_PCT, GPU_BUSY_UTIL_PCT, gpu_activity, gpu_busy, input_bound

# Syncs per step worth a finding; GradScaler and an occasional .item() account for one or two.
SYNCS_PER_STEP = 3
SYNCS_GAIN = 1.5


def _sync_gain_bound(o: Observation) -> tuple[float, str] | None:
    """The most removing the step's syncs can gain, from the GPU's busy time (NVML: the share
    of time a kernel runs). The host waits at a sync only while the GPU works, so the waits
    are at most that share (the step can shrink to 1 - busy); and the GPU can at most fill
    its idle time (1 / busy). On the H100/H200 corpus the measured gains sat under it: 1.03x
    and 1.10x at 24% and 29% busy (bound 1.32x, 1.41x), 1.60x and 1.56x at 56% and 62%
    (bound 1.79x, 1.61x) (docs/diagnosis.md). None without NVML."""
    util = o.gpu.util_pct
    if not o.uses_gpu or util is None:
        return None
    busy = min(max(util, 1.0), 100.0) / 100.0
    bound = 1.0 / max(busy, 1.0 - busy)
    return bound, f"GPU busy {fmt.pct(util)} of the time (NVML): syncs cost at most {bound:.2f}x"


def host_device_syncs(o: Observation) -> Finding | None:
    if o.syncs_per_step is None or o.syncs_per_step < SYNCS_PER_STEP:
        return None
    sites = [
        f"{fmt.code_line(site['file'], site['line'])} {site['op']} (x{site['count']})"
        for site in o.sync_sites[:5]
    ]
    evidence = [f"sync scan of one step: {o.syncs_per_step} synchronizing ops (hook)", *sites]
    gain, bounded = SYNCS_GAIN, _sync_gain_bound(o)
    if bounded is not None:
        gain = min(gain, bounded[0])
        evidence.append(bounded[1])
    return Finding(
        "syncs",
        f"{o.syncs_per_step} host-device syncs per step",
        tuple(evidence),
        "replace data-dependent ops (nonzero, unique, boolean masks, .item(), .cpu()) with "
        "fixed-shape ones (torch.where, masked reductions, ignore_index); log on the GPU",
        f"up to {gain:.1f}x" if bounded is not None else None,
        0.8,
        gain,
        changes=(Change("syncs", False),),
    )


def per_step_sync(o: Observation) -> Finding | None:
    """One or two syncs per step in the user's code (a logged loss.item(), a NaN check): the
    CPU waits for the GPU each step, then the GPU waits while the CPU prepares the next one.
    Worth it only while the GPU is short of busy."""
    count = o.syncs_per_step
    if count is None or not 1 <= count < SYNCS_PER_STEP or not o.uses_gpu:
        return None
    activity, activity_text = gpu_activity(o)
    if activity is None or gpu_busy(o) or input_bound(o):
        return None
    busy_line = GPU_BUSY_SM_PCT if o.gpu.sm_active_pct is not None else GPU_BUSY_UTIL_PCT
    gain = min(SYNCS_GAIN, busy_line / max(activity, 5.0))
    bounded = _sync_gain_bound(o)
    if bounded is not None:
        gain = min(gain, bounded[0])
    sites = [
        f"{fmt.code_line(site['file'], site['line'])} {site['op']} (x{site['count']})"
        for site in o.sync_sites[:3]
    ]
    return Finding(
        "syncs.per_step",
        f"{count} host-device sync{'s' if count > 1 else ''} every step, and the GPU idles "
        "meanwhile",
        (f"sync scan of one step: {count} synchronizing ops (hook)", *sites, activity_text),
        "keep the per-step figures on the GPU (accumulate the loss in a tensor, check for "
        "NaN/inf with torch.isfinite on the GPU) and read them every N steps",
        f"up to {gain:.1f}x",
        0.5,
        gain,
        changes=(Change("syncs", False),),
    )
