"""What the window shows, read the same way by every family: whether the GPU is busy, how long
the step waits for data, and the evidence lines that say so. Here so that the input, GPU,
syncs and model families agree on one line for "busy" and "input-bound"."""

from __future__ import annotations

from ... import format as fmt
from ... import wire
from ...session.stats import Observation

# The PyTorch profiler's recommendations flag a DataLoader share above 5% of the step
# and GPU utilization under 50%; we use the same lines.
DATA_WAIT_PCT = 5.0
GPU_UNDERUSED_PCT = 50.0
# A wait on data only matters when the GPU idles meanwhile: at 80% SM activity (90% NVML
# utilization without GPM) the GPU is the bottleneck, whatever the DataLoader does.
GPU_BUSY_SM_PCT = 80.0
GPU_BUSY_UTIL_PCT = 90.0
# Input-bound runs are first fixed at the input: other advice waits until the wait is small.
INPUT_DOMINANT_PCT = 20.0


def gpu_busy(o: Observation) -> bool:
    if not o.uses_gpu:
        return False
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct >= GPU_BUSY_SM_PCT
    return o.gpu.util_pct is not None and o.gpu.util_pct >= GPU_BUSY_UTIL_PCT


def gpu_activity(o: Observation) -> tuple[float | None, str]:
    if o.gpu.sm_active_pct is not None:
        return o.gpu.sm_active_pct, f"SM activity {fmt.pct(o.gpu.sm_active_pct)} (GPM)"
    return o.gpu.util_pct, f"GPU utilization {fmt.pct(o.gpu.util_pct)} (NVML)"


def wait_pct(o: Observation) -> float:
    return o.steps.data_wait_pct or 0.0


def input_bound(o: Observation) -> bool:
    return o.steps.data_wait_pct is not None and wait_pct(o) >= DATA_WAIT_PCT and not gpu_busy(o)


def wait_evidence(o: Observation) -> str:
    if o.data_wait_source == "py-spy":
        share = fmt.pct(o.steps.data_wait_pct)
        return f"the training thread waits for data in {share} of its samples (py-spy)"
    return f"data-wait {fmt.pct(o.steps.data_wait_pct)} of the step (hook)"


def main_evidence(o: Observation) -> str:
    return f"training process at {fmt.pct(o.main_cpu_pct)} CPU (psutil)"


def site_evidence(site: wire.CodeSite | None, what: str) -> tuple[str, ...]:
    """The script's line where an edit goes, as the hook saw it, "train.py:40 loader =
    DataLoader(...) (the DataLoader's construction, hook)": the autopilot's ledger lists such
    lines beside an edit (autopilot/ledger.py); none where the hook did not see it."""
    if site is None:
        return ()
    where = fmt.code_line(site["file"], site["line"])
    return (f"{where} {site['op']} ({what}, hook)" if site["op"] else f"{where} {what} (hook)",)
