"""What the advisor judges: an observation assembled from the session's series, as pure
functions of what they are given (the session calls them with its lock held and its own
containers in a ``Series``; a test can call them with plain lists).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import TypeVar, cast

from .. import wire
from ..samples import DATA_WAIT, GpuSample, StackShares
from . import gpu_table, stats
from .clocks import gpu_clocks
from .job_gpus import JobGpus, gpu_figures
from .phases import WARMUP_STEPS, Phase
from .steps import Step
from .workload import Workload

# The advisor judges a window only with this many measured (post-warm-up) steps covering this
# many seconds: short runs on the H100 drew "GPU under-used" and "launch-bound" headlines from
# the seconds before their first steps, and a single epoch's worker start-up read as a
# per-epoch restart (issue: diagnosis). Two seconds hold 20 NVML and 2 process samples.
MIN_ADVICE_STEPS = 5
MIN_ADVICE_S = 2.0

Ticks = Sequence[tuple[GpuSample, ...]]
F = TypeVar("F", bound=wire.Frame)


@dataclass(frozen=True)
class Series:
    """The session's series an observation reads, at one instant (read only)."""

    primary: int | None  # the primary process (lowest rank, then PID)
    phases: Sequence[Phase]
    last_step: Mapping[int, int]  # per PID, its last step
    gpu: Ticks
    proc_ticks: Sequence[stats.ProcTick]
    facts: Mapping[type[wire.Frame], Sequence[tuple[float, wire.Frame]]]  # (seen, frame)
    stacks: tuple[float, StackShares] | None  # when seen, py-spy's latest window
    hooked: int  # how many processes are hooked
    world_size: int | None  # the job's ranks, as the hooks' WORLD_SIZE says; None: unknown
    gpu_names: tuple[str | None, ...]
    cpu_count: int | None
    # Per hooked process, its figures over some steps (the session's, for its identities).
    rank_stats: Callable[[Sequence[Step]], tuple[stats.RankStats, ...]]
    job_gpus: JobGpus | None = None  # the job's GPUs: ``gpu`` holds their samples only
    workers_max: int | None = None  # the workers knob's maximum (Observation.workers_max)
    # Each GPU's window figures, kept between calls (session/gpu_windows.py); None: computed.
    over_window: gpu_table.OverWindow | None = None


def advice_window(
    series: Series,
    recent: list[Step],
    recent_gpu: list[tuple[GpuSample, ...]],
    since: float,
    end: float,
    figures: stats.StepStats,
) -> tuple[stats.Observation | None, str | None]:
    """The observation the advisor judges over a live window, or why there is none;
    ``figures`` are the window's own step figures (``recent``'s)."""
    primary = series.primary
    if primary is None or not recent:
        if series.stacks and not series.hooked:
            seen, stacks = series.stacks  # current until the next window is due
            if since - stacks.window_s <= seen <= end:
                return observe(series, [], recent_gpu, since, end), None
        if primary is None:
            return None, "no training step seen yet"
        return None, f"no training step in the last {end - since:g} s"
    phase = series.phases[-1]
    # The phase's first steps pay for its start (workers forking, cuDNN autotuning, a
    # compile): the advisor skips them, as the phase table does (phases.WARMUP_STEPS).
    first = phase.first_step + WARMUP_STEPS
    if series.last_step.get(primary, 0) < first:
        return None, f"phase {phase.index} ({phase.change}) is warming up"
    own = [s for s in recent if s.pid == primary and s.step >= first]
    others = [s for s in recent if s.pid != primary]
    # One process past its phase's warm-up: the same steps as the window's figures, which
    # were a third of a view's cost when computed again (py-spy, H200, 2026-11-24).
    same = figures if not others and len(own) == len(recent) else None
    return observe_measured(series, own, others, same)


def observe_measured(
    series: Series,
    measured: Sequence[Step],
    other_ranks: Sequence[Step] = (),
    known: stats.StepStats | None = None,
) -> tuple[stats.Observation | None, str | None]:
    """An observation of measured steps (one phase, warm-up excluded) over the time they
    ran; None, with the reason, when they are too few to judge. ``known``: their step
    figures, where already computed."""
    timed = [s for s in measured if s.step_ms is not None]
    if len(timed) < MIN_ADVICE_STEPS:
        return None, f"needs {MIN_ADVICE_STEPS} measured steps (has {len(timed)})"
    start = timed[0].t - timed[0].step_ms / 1000.0  # type: ignore[operator]
    stop = timed[-1].t
    if stop - start < MIN_ADVICE_S:
        return None, f"needs {MIN_ADVICE_S:g} s of measured steps (has {stop - start:.1f} s)"
    ranks = [s for s in other_ranks if start < s.t <= stop]
    ticks = ticks_between(series.gpu, start, stop)
    return observe(series, timed + ranks, ticks, start, stop, known), None


def fact_at(series: Series, kind: type[F], t: float) -> F | None:
    """The latest frame of a fact class (``wire.Loader``, ...) known at time ``t``."""
    found = None
    for seen, frame in series.facts.get(kind, ()):
        if seen > t:
            break
        found = frame
    return cast("F | None", found)


def observe(
    series: Series,
    steps: list[Step],
    gpu_ticks: list[tuple[GpuSample, ...]],
    start: float,
    end: float,
    known: stats.StepStats | None = None,
) -> stats.Observation:
    """What the advisor needs over [start, end]; ``known``: the step figures of ``steps``,
    where already computed."""
    procs = ticks_covering(series.proc_ticks, start, end)
    node_workers, worker_cpu, main_cpu, system_cpu = stats.mean_worker_cpu(procs)
    room = stats.cpu_room(procs)
    loader = fact_at(series, wire.Loader, end) or wire.Loader()
    ranks_here = stats.local_ranks(procs)
    workers = stats.loader_workers(loader.num_workers, node_workers, ranks_here)
    epochs = sum(1 for seen, _ in series.facts.get(wire.Loader, ()) if start <= seen <= end)
    syncs = fact_at(series, wire.Syncs, end)
    flops = fact_at(series, wire.Flops, end) or wire.Flops(None)
    parts = fact_at(series, wire.StepParts, end) or wire.StepParts()
    step_stats, wait_source = known or stats.step_stats(steps, series.primary), "hook"
    if not steps and series.stacks:
        step_stats = _replace(step_stats, data_wait_pct=series.stacks[1].shares[DATA_WAIT])
        wait_source = "py-spy"
    return stats.Observation(
        ranks=series.rank_stats(steps) if series.hooked > 1 else (),
        world_size=series.world_size,
        steps=step_stats,
        gpu=stats.gpu_stats(gpu_ticks, series.over_window),
        gpus=gpu_figures(gpu_ticks, series.job_gpus, series.over_window) if series.job_gpus else (),
        job_gpus=series.job_gpus,
        gpu_clocks=gpu_clocks(gpu_ticks),
        gpu_name=next((n for n in series.gpu_names if n), None),
        pcie_rx_mibps=stats.mean_pcie_rx(gpu_ticks),
        workers=workers,
        worker_cpu_pct=worker_cpu,
        main_cpu_pct=main_cpu,
        cpu_count=series.cpu_count,
        batch_dtype=loader.dtype,
        batch_shape=tuple(loader.shape) if loader.shape is not None else None,
        batch_bytes=loader.bytes,
        pin_memory=loader.pin_memory,
        persistent_workers=loader.persistent_workers,
        syncs_per_step=syncs.count if syncs else None,
        sync_sites=tuple(syncs.sites) if syncs else (),
        flops_per_sample=flops.flops / flops.samples
        if flops.flops is not None and flops.samples
        else None,
        model=fact_at(series, wire.Model, end) or wire.Model(),
        flops_per_step=float(flops.flops) if flops.flops is not None else None,
        workload=Workload.from_frame(fact_at(series, wire.Workload, end)),
        data_wait_source=wait_source,
        system_cpu_pct=system_cpu,
        epochs=epochs,
        window_s=end - start,
        job_cpu_pct=room.job_cpu_pct,
        usable_cores=room.usable_cores,
        memory=fact_at(series, wire.MemoryAudit, end),
        step_parts_reason=parts.reason,
        timed_model=parts.model,
        local_ranks=ranks_here,
        worker_run_wait_pct=stats.mean_worker_wait(procs),
        main_run_wait_pct=stats.mean_main_wait(procs),
        workers_max=series.workers_max,
        loader_site=loader.constructed_at,
    )


def ticks_covering(
    ticks: Sequence[stats.ProcTick], start: float, end: float
) -> list[stats.ProcTick]:
    """Process samples whose period (since the sample before) overlaps [start, end]: psutil's
    CPU % of a sample is its average since the previous one."""
    out: list[stats.ProcTick] = []
    previous_t = float("-inf")
    for tick in ticks:
        if tick.t > start and previous_t < end:
            out.append(tick)
        if tick.t >= end:
            break
        previous_t = tick.t
    return out


def tail_between(steps: Sequence[Step], since: float, end: float) -> list[Step]:
    """The steps in (since, end], walking back from the newest (windows are short)."""
    out = []
    for step in reversed(steps):
        if step.t > end:
            continue
        if step.t <= since:
            break
        out.append(step)
    out.reverse()
    return out


def ticks_between(ticks: Ticks, since: float, end: float) -> list[tuple[GpuSample, ...]]:
    """The GPU ticks in (since, end], walking back from the newest."""
    out = []
    for tick in reversed(ticks):
        if not tick:
            continue
        if tick[0].t > end:
            continue
        if tick[0].t <= since:
            break
        out.append(tick)
    out.reverse()
    return out
