"""The report's charts, drawn by matplotlib as inline SVG (static, no script, no network).

matplotlib is an optional extra: ``needs.require()`` says so in one line where it is missing,
before this module is imported.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..session.breakdown import PART_NAMES, step_parts
from ..session.phases import split_warmup
from . import downsample
from .load import Run
from .series import GpuSeries, ProcessSeries

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Magenta: no colour of matplotlib's default cycle (the series' colours), so a phase line
# never reads as data (and the screenshot test finds it by colour).
PHASE_COLOUR = "#e6007e"
WIDTH_IN = 11.0
# Phase names written on the plot up to this many phases; past it (the autopilot's 19 on the
# H100 demo run of docs/results/autopilot-demo-h100-2026-11-24T20h36) they overlapped.
MAX_NAMED_PHASES = 8  # inches at 100 dpi: the report's column is 1100 px wide


@contextmanager
def _figure(rows: int, height_in: float) -> Iterator[Figure]:
    import matplotlib
    from matplotlib.figure import Figure

    # Text stays text (small files, the browser's fonts); ids are stable between runs.
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "gputop-train", "font.size": 9}
    ):
        yield Figure(figsize=(WIDTH_IN, height_in), dpi=100, layout="constrained")


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prologue or doctype


def _mark_phases(axes: Sequence[Axes], run: Run) -> None:
    """A dashed line where each phase began on every plot; its number, change and gain above
    the first."""
    for mark in run.phases[1:]:
        for ax in axes:
            ax.axvline(mark.t, color=PHASE_COLOUR, linestyle="--", linewidth=1)
        gain = f" {mark.speedup:.2f}x" if mark.speedup else ""
        failed = " (reverted)" if mark.failed else ""
        # Many phases (an autopilot's rungs): the number and gain only, the change is in the
        # phase table below; a few: the change too.
        change = "" if len(run.phases) > MAX_NAMED_PHASES else f": {mark.change}"
        axes[0].annotate(
            f"{mark.index}{change}{gain}{failed}",
            xy=(mark.t, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12 - 11 * ((mark.index - 2) % 3)),
            textcoords="offset points",
            color=PHASE_COLOUR,
            fontsize=8,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )


def _band(ax: Axes, b: downsample.Buckets, colour: str, label: str, band: bool) -> None:
    ax.plot(b.t, b.mean, color=colour, linewidth=1.2, label=label)
    if band:
        ax.fill_between(b.t, b.low, b.high, color=colour, alpha=0.2, linewidth=0)


# Lines drawn one per rank or GPU up to this many; past it one band for them all (mean line,
# min-max band): 256 ranks drew 1,024 lines and a legend of 768 entries, 12 of the report's
# 17 s (256 ranks x 2 min, dev box, 2026-12-05; git show 6a2d3ea:benchmarks/scale/report_size.py).
MAX_LINES = 8


def _pooled(buckets: Sequence[downsample.Buckets]) -> downsample.Buckets:
    """Many series' buckets as one: the mean of their means, the min and max of their
    extremes (NaN where none was measured)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a bucket empty in every series
        return downsample.Buckets(
            buckets[0].t,
            np.nanmean([b.mean for b in buckets], axis=0),
            np.nanmin([b.low for b in buckets], axis=0),
            np.nanmax([b.high for b in buckets], axis=0),
        )


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#777")


def _colour(i: int) -> str:
    return f"C{i % 10}"


def timeline(run: Run, procs: list[ProcessSeries], gpus: list[GpuSeries]) -> str:
    """Step time, throughput, data-wait and GPU activity over the run, phases marked."""
    from matplotlib.ticker import EngFormatter

    end = max([float(p.t[-1]) for p in procs if len(p.t)] + [float(g.t[-1]) for g in gpus
              if len(g.t)] + [1.0])  # fmt: skip
    bounds = downsample.edges(0.0, end)
    with _figure(4, 9.0) as fig:
        axes = fig.subplots(4, 1, sharex=True)
        step_ax, rate_ax, wait_ax, gpu_ax = axes
        several = len(procs) > 1
        tokens = any(not np.all(np.isnan(p.tokens)) for p in procs)
        work = "tokens" if tokens else "samples"
        total = np.zeros(len(bounds) - 1)
        measured = np.zeros(len(bounds) - 1, dtype=bool)
        means, highs = [], []
        pooled = len(procs) > MAX_LINES
        every_step, every_wait = [], []
        for i, p in enumerate(procs):
            steps = downsample.extremes(p.t, p.step_ms, bounds)
            means.append(steps.mean)
            highs.append(steps.high)
            done = p.tokens if tokens else p.samples
            rate = downsample.ratio(p.t, done, p.step_ms / 1000.0, bounds)
            measured |= ~np.isnan(rate)
            total += np.nan_to_num(rate)
            share = 100.0 * downsample.ratio(p.t, p.data_ms, p.step_ms, bounds)
            if pooled:
                every_step.append(steps)
                every_wait.append(downsample.Buckets(steps.t, share, share, share))
                continue
            _band(step_ax, steps, _colour(i), p.label, band=not several or i == 0)
            wait_ax.plot(steps.t, share, color=_colour(i), linewidth=1.2, label=p.label)
        if pooled:
            label = f"all {len(procs)} processes (mean; band: min-max)"
            _band(step_ax, _pooled(every_step), _colour(0), label, band=True)
            _band(wait_ax, _pooled(every_wait), _colour(0), label, band=True)
        step_ax.set_ylabel("step time, ms\n(hook; band: min-max)")
        _clip_outliers(step_ax, means, highs)
        if procs:
            rate_ax.plot(bounds[:-1] + np.diff(bounds) / 2, np.where(measured, total, np.nan),
                         color="C0", linewidth=1.2)  # fmt: skip
            rate_ax.set_ylim(bottom=0)
        else:
            for ax in (step_ax, rate_ax, wait_ax):
                _note(ax, "N/A: no step was recorded (no hooked process stepped)")
        rate_ax.set_ylabel(f"{work}/s\n(hook, all ranks)")
        rate_ax.yaxis.set_major_formatter(EngFormatter())
        wait_ax.set_ylabel("data-wait,\n% of step (hook)")
        wait_ax.set_ylim(0, 100)
        _gpu_activity(gpu_ax, run, gpus, bounds)
        gpu_ax.set_xlabel("seconds since the session started")
        gpu_ax.set_xlim(0, end)
        for ax in axes:
            ax.grid(True, alpha=0.3)
        _mark_phases(axes, run)
        handles, labels = [], []
        for ax in (step_ax, gpu_ax) if several or len(gpus) > 1 else (gpu_ax,):
            h, lab = ax.get_legend_handles_labels()
            handles += h
            labels += lab
        if handles:  # above the plots: a legend inside one hides its lines and phase names
            fig.legend(handles, labels, loc="outside upper center", fontsize=7, ncols=8)
        return _svg(fig)


# A first step (compile, cuDNN autotuning, worker start) can be 100x the others: the step
# axis stops at this multiple of the 95th percentile of the buckets' means and says so. On
# the H100 ladder recording (docs/examples) the spikes of compiles and autotuning put the
# 99th percentile of the buckets' maxima at ~2 s against steps of 10-100 ms.
OFF_SCALE = 2.0


def _clip_outliers(ax: Axes, means: list[np.ndarray], highs: list[np.ndarray]) -> None:
    typical = np.concatenate(means) if means else np.array([])
    typical = typical[~np.isnan(typical)]
    peaks = np.concatenate(highs) if highs else np.array([])
    peaks = peaks[~np.isnan(peaks)]
    if not len(typical) or not len(peaks):
        return
    top = float(np.percentile(typical, 95)) * OFF_SCALE
    peak = float(peaks.max())
    if peak > top:
        ax.set_ylim(0, top)
        ax.set_ylabel(f"{ax.get_ylabel()}\nmax {peak:.0f} ms: off scale")
    else:
        ax.set_ylim(bottom=0)


def _gpu_activity(ax: Axes, run: Run, gpus: list[GpuSeries], bounds: np.ndarray) -> None:
    ax.set_ylabel("GPU activity, %\n(NVML util; GPM SM)")
    ax.set_ylim(0, 105)
    drawn = False
    if len(gpus) > MAX_LINES:
        drawn, gpus = _pooled_gpus(ax, gpus, bounds), []
    for i, g in enumerate(gpus):
        util = downsample.extremes(g.t, g.util_pct, bounds)
        if not np.all(np.isnan(util.mean)):
            _band(ax, util, _colour(i), f"GPU {g.index} util", band=len(gpus) == 1)
            drawn = True
        sm = downsample.extremes(g.t, g.sm_active_pct, bounds)
        if not np.all(np.isnan(sm.mean)):
            ax.plot(sm.t, sm.mean, color=_colour(i), linestyle=":", label=f"GPU {g.index} SM")
            drawn = True
    if not drawn:
        why = run.recording.meta.get("nvml_error") or _nvml_reason(run)
        _note(ax, f"N/A: {why}")


def _pooled_gpus(ax: Axes, gpus: list[GpuSeries], bounds: np.ndarray) -> bool:
    """Many GPUs' utilization and SM activity as one band each; whether any was drawn."""
    drawn = False
    for i, (name, field, style) in enumerate(
        (("util", "util_pct", "-"), ("SM", "sm_active_pct", ":"))
    ):
        series = [downsample.extremes(g.t, getattr(g, field), bounds) for g in gpus]
        if all(np.all(np.isnan(b.mean)) for b in series):
            continue
        pooled = _pooled(series)
        ax.plot(pooled.t, pooled.mean, color=_colour(i), linestyle=style,
                label=f"all {len(gpus)} GPUs {name} (mean; band: min-max)")  # fmt: skip
        ax.fill_between(pooled.t, pooled.low, pooled.high, color=_colour(i), alpha=0.2,
                        linewidth=0)  # fmt: skip
        drawn = True
    return drawn


def _nvml_reason(run: Run) -> str:
    for line in run.recording.events:
        if line.get("kind") == "gpus" and line.get("error"):
            return f"no GPU figures ({line['error']})"
    return "no GPU figures in this recording"


def ranks(summary: dict[str, Any]) -> str | None:
    """Each rank's step time p50, data-wait and collective wait: the straggler at a glance."""
    rows = summary["figures"].get("ranks") or []
    if len(rows) < 2:
        return None
    shown = ""
    if len(rows) > MAX_RANK_BARS:  # the stragglers: the others wait for them in collectives
        rows = sorted(rows, key=_own_work, reverse=True)[:MAX_RANK_BARS]
        total = len(summary["figures"]["ranks"])
        shown = f"; the {MAX_RANK_BARS} of {total} with the most step time outside collectives"
    labels = [f"rank {r['rank']}" if r["rank"] is not None else f"PID {r['pid']}" for r in rows]
    with _figure(1, 2.6 if len(rows) <= 8 else 0.9 + 0.16 * len(rows)) as fig:
        step_ax, wait_ax = fig.subplots(1, 2)
        y = np.arange(len(rows))
        step = [r["step_ms_p50"] or 0.0 for r in rows]
        comm = [r.get("comm_ms_p50") or 0.0 for r in rows]
        step_ax.barh(y, step, color="C0", label="step p50")
        step_ax.barh(y, comm, color="C1", alpha=0.8, label="of which collective wait p50")
        step_ax.set_yticks(y, labels)
        step_ax.invert_yaxis()
        step_ax.set_xlabel(f"ms (hook, end of run{shown})")
        step_ax.legend(fontsize=7, loc="lower right")
        wait = [r["data_wait_pct"] or 0.0 for r in rows]
        wait_ax.barh(y, wait, color="C2")
        wait_ax.set_yticks(y, labels)
        wait_ax.invert_yaxis()
        wait_ax.set_xlim(0, 100)
        wait_ax.set_xlabel("data-wait, % of step time (hook)")
        return _svg(fig)


# Bars drawn one per rank up to this many; past it the stragglers only (the table below the
# chart lists every rank): 256 bars' labels were unreadable at any height.
MAX_RANK_BARS = 16


def _own_work(rank: dict[str, Any]) -> float:
    return (rank["step_ms_p50"] or 0.0) - (rank.get("comm_ms_p50") or 0.0)


def step_split(run: Run) -> str | None:
    """Each phase's step split (data, forward, backward, optimizer, rest) as a stacked bar,
    over its measured steps, by the session's own breakdown."""
    own = [s for s in run.steps if run.primary_pid is None or s.pid == run.primary_pid]
    firsts = [m.first_step for m in run.phases] or [0]
    bars = []
    for i, mark_first in enumerate(firsts):
        end = firsts[i + 1] if i + 1 < len(firsts) else None
        phase = [s for s in own if s.step >= mark_first and (end is None or s.step < end)]
        warmup, measured = split_warmup(phase)
        parts = step_parts(measured or warmup)
        if parts is not None:
            change = run.phases[i].change if run.phases else "start"
            bars.append((f"{i + 1}: {change}"[:30], parts))
    if not bars:
        return None
    with _figure(1, 0.9 + 0.35 * len(bars) + 0.6) as fig:
        ax = fig.subplots()
        y = np.arange(len(bars))
        left = np.zeros(len(bars))
        for i, name in enumerate(PART_NAMES):
            widths = np.array([b[1].ms.get(name) or 0.0 for b in bars])
            ax.barh(y, widths, left=left, color=_colour(i), label=name)
            left += widths
        ax.set_yticks(y, [b[0] for b in bars])
        ax.invert_yaxis()
        clock = ", ".join(sorted({b[1].clock for b in bars}))
        ax.set_xlabel(f"mean ms per step ({clock} clock; hook)")
        fig.legend(loc="outside upper center", ncols=len(PART_NAMES), fontsize=7)
        return _svg(fig)


def memory(run: Run, procs: list[ProcessSeries], gpus: list[GpuSeries]) -> str | None:
    """GPU memory over the run (NVML per GPU, and each process's allocator), its peak marked."""
    series = [(f"GPU {g.index} used (NVML)", g.t, g.mem_used_bytes) for g in gpus]
    series = [s for s in series if not np.all(np.isnan(s[2]))]
    if len(series) > MAX_LINES:  # the fullest GPU's at each sample, and the mean of them all
        series = _fullest_and_mean(gpus)
    if not series:  # no NVML: each process's CUDA allocator, as its hook reads it
        series = [(f"{p.label} allocated (hook)", p.t, p.mem_alloc) for p in procs]
        series += [(f"{p.label} allocator peak (hook)", p.t, p.mem_peak) for p in procs[:1]]
        series = [s for s in series if not np.all(np.isnan(s[2]))]
    if not series:
        return None
    end = max(float(t[-1]) for _, t, _ in series)
    bounds = downsample.edges(0.0, end)
    with _figure(1, 3.4) as fig:
        ax = fig.subplots()
        peak = (0.0, 0.0, "")
        for i, (label, t, values) in enumerate(series):
            b = downsample.extremes(t, values / 2**30, bounds)
            _band(ax, b, _colour(i), label, band=False)
            top = int(np.nanargmax(values))
            if values[top] / 2**30 > peak[1]:
                peak = (float(t[top]), float(values[top] / 2**30), label)
        ax.plot([peak[0]], [peak[1]], marker="v", color="black")
        ax.annotate(f"peak {peak[1]:.2f} GiB ({peak[2]})", xy=(peak[0], peak[1]),
                    xytext=(5, 5), textcoords="offset points", fontsize=8)  # fmt: skip
        ax.set_ylabel("GiB")
        ax.set_ylim(bottom=0, top=peak[1] * 1.2 or 1.0)
        ax.set_xlim(0, end)
        ax.set_xlabel("seconds since the session started")
        ax.grid(True, alpha=0.3)
        fig.legend(loc="outside upper center", fontsize=7, ncols=8)
        _mark_phases([ax], run)
        return _svg(fig)


def _fullest_and_mean(gpus: list[GpuSeries]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Many GPUs' memory as two series on their common sample times: the fullest GPU's at each
    sample, and the mean over them."""
    import warnings

    times = np.unique(np.concatenate([g.t for g in gpus]))
    grid = np.full((len(gpus), len(times)), np.nan)
    for row, g in enumerate(gpus):
        grid[row, np.searchsorted(times, g.t)] = g.mem_used_bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a time no GPU was sampled at
        return [(f"the fullest of {len(gpus)} GPUs (NVML)", times, np.nanmax(grid, axis=0)),
                (f"mean of {len(gpus)} GPUs (NVML)", times, np.nanmean(grid, axis=0))]  # fmt: skip
