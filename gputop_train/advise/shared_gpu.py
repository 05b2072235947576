"""A GPU of the job that another process uses too (another job, another user, a notebook):
its kernels time-slice with the job's and its memory is not the job's headroom (issue 37)."""

from __future__ import annotations

from .. import format as fmt
from ..session.job_gpus import GpuFigures, GpuUser

# Another process's mean NVML per-process SM share over the window at which it is named as
# taking the job's GPU time: NVML reads a process's SM % from its own kernels' time, so a
# process that takes 10% of the SMs' time is 10% the job's kernels wait behind. A judgement
# (a tenth of the GPU), not yet a measured line; docs/gpus.md records the runs beside it.
SHARED_SM_PCT = 10.0
# Its memory, where NVML cannot read its SM share: a tenth of the GPU held by another process
# is named (the job's larger-batch headroom is that much smaller).
SHARED_MEMORY_SHARE = 0.10


def shared(gpu: GpuFigures) -> tuple[GpuUser, ...]:
    """The processes on one of the job's GPUs that take a share worth naming."""
    if not gpu.job:
        return ()
    total = gpu.mem_total_bytes or 0
    return tuple(
        u
        for u in gpu.others
        if (u.sm_pct is not None and u.sm_pct >= SHARED_SM_PCT)
        or (u.sm_pct is None and total and (u.mem_bytes or 0) >= SHARED_MEMORY_SHARE * total)
    )


def sm_share(users: tuple[GpuUser, ...]) -> float | None:
    known = [u.sm_pct for u in users if u.sm_pct is not None]
    return min(100.0, sum(known)) if known else None


def user_line(gpu: GpuFigures, user: GpuUser) -> str:
    """One other process in words: who, what it takes (NVML per-process figures)."""
    who = f"PID {user.pid}"
    if user.user or user.command:
        who += f" ({', '.join(x for x in (user.user, user.command) if x)})"
    memory = f"{fmt.gib(user.mem_bytes)} GiB" if user.mem_bytes is not None else f"{fmt.NA} memory"
    sm = fmt.pct(user.sm_pct)
    return f"GPU {gpu.index}: {who} is not the job's; it takes {sm} of SM time, {memory} (NVML)"
