"""Every GPU figure declared once (issue 47): a row per ``GpuSample`` field says how it is
read over a window on one GPU, its name and rounding in the JSON, and how the job's figure is
formed over its GPUs. Each GPU's figures (``job_gpus.GpuFigures``), the job's
(``stats.GpuStats``), the headless JSON (``views``), the charts, the phase rows and the
Prometheus GPU families are derived from these rows (nvitop's snapshot-keys habit), so a
figure has one window wherever it is shown, on one GPU and on eight."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..samples import GpuSample

# How one GPU's samples over a window give its figure.
MEAN = "mean"  # a rate or a level that swings (utilization, power, clocks)
LATEST = "latest"  # a level the window's end holds (memory, temperature, limits)
UNION = "union"  # a set, every member seen in the window (throttle reasons)
# How the job's figure is formed over its GPUs (docs/gpus.md) from each GPU's figure.
GPUS_MEAN = "mean over GPUs"
GPUS_SUM = "sum over GPUs"
FULLEST = "the fullest GPU's"  # memory: the headroom a larger batch has is per GPU


@dataclass(frozen=True)
class GpuField:
    """One ``GpuSample`` field as a figure: ``window`` (MEAN, LATEST or UNION) over one GPU's
    samples, its ``json`` name in ``gpus[]`` (the field's own by default) and its rounding
    (``digits``; None: as NVML gave it), and, for a figure of the job, how it is formed over
    the job's GPUs (``job``) and its name at the JSON's top level (``job_json``)."""

    name: str
    window: str
    digits: int | None = None
    job: str | None = None
    job_json: str | None = None
    json: str = ""

    @property
    def json_name(self) -> str:
        return self.json or self.name


GPU_FIELDS: tuple[GpuField, ...] = (
    GpuField("util_pct", MEAN, 1, GPUS_MEAN, "gpu_util_pct"),
    GpuField("sm_active_pct", MEAN, 1, GPUS_MEAN, "sm_active_pct"),
    GpuField("tensor_active_pct", MEAN, 1, GPUS_MEAN, "tensor_active_pct"),
    GpuField("mem_used_bytes", LATEST, None, FULLEST, "gpu_mem_used_bytes"),
    GpuField("mem_total_bytes", LATEST, None, FULLEST, "gpu_mem_total_bytes"),
    GpuField("power_w", MEAN, 1, GPUS_SUM, "gpu_power_w"),
    GpuField("mem_util_pct", MEAN, 1),
    GpuField("sm_occupancy_pct", MEAN, 1),
    GpuField("dram_bw_pct", MEAN, 1),
    GpuField("power_limit_w", LATEST, 1),
    GpuField("energy_j", LATEST, 1),
    GpuField("sm_clock_mhz", MEAN, 0),
    GpuField("sm_clock_max_mhz", LATEST),
    GpuField("mem_clock_mhz", MEAN, 0),
    GpuField("temp_c", LATEST),
    GpuField("throttle", UNION),
    GpuField("pcie_rx_mibps", MEAN, 1),
    GpuField("pcie_tx_mibps", MEAN, 1),
    GpuField("error", LATEST),  # why NVML reads nothing of it now ("GPU is lost")
)
# The GpuSample fields that are not figures: who and when it is, and its processes (which
# session/job_gpus.py splits into the job's and the others').
APART = frozenset({"index", "t", "name", "processes", "processes_listed"})
JOB_FIELDS: tuple[GpuField, ...] = tuple(row for row in GPU_FIELDS if row.job is not None)


def mean(values: Iterable[Any]) -> float | None:
    """The known values' mean; None where none is known (N/A, never 0)."""
    # sum, not fsum: an absurd recorded figure (1e308) reads inf, never an OverflowError.
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _latest(values: Iterable[Any]) -> Any:
    """The window's last sample's (None where that one is N/A: a level is as it is now)."""
    every = list(values)
    return every[-1] if every else None


def _union(values: Iterable[Any]) -> tuple[str, ...] | None:
    seen = [found for found in values if found is not None]
    return tuple(dict.fromkeys(r for found in seen for r in found)) if seen else None


_OVER_WINDOW: dict[str, Callable[[Iterable[Any]], Any]] = {
    MEAN: mean,
    LATEST: _latest,
    UNION: _union,
}


# Each row's reader of a sample: a C getter mapped over the window, not a generator
# expression (a snapshot of 8 GPUs reads 19 fields of ~20 samples each, issue 47 point 7).
_FIELD = {row.name: attrgetter(row.name) for row in GPU_FIELDS}


def over_window(
    samples: Sequence[GpuSample], rows: Sequence[GpuField] | None = None
) -> dict[str, Any]:
    """One GPU's figures over its samples of a window (oldest first), by the table (``rows``:
    the job's alone where only those are wanted)."""
    return {
        row.name: _OVER_WINDOW[row.window](map(_FIELD[row.name], samples))
        for row in (GPU_FIELDS if rows is None else rows)
    }


# One GPU's figures over its samples of a window, as ``over_window`` gives them (every row):
# that function, or the session's kept windows (session/gpu_windows.py). Read only.
OverWindow = Callable[[Sequence[GpuSample]], Mapping[str, Any]]


def by_gpu(ticks: Iterable[tuple[GpuSample, ...]]) -> dict[int, list[GpuSample]]:
    """Each GPU's samples of ``ticks``, by index, oldest first."""
    found: dict[int, list[GpuSample]] = {}
    for tick in ticks:
        for gpu in tick:
            found.setdefault(gpu.index, []).append(gpu)
    return found


def fullest(gpus: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The GPU with the least free memory (by share where its total is known, else the most
    used), of those whose memory NVML read: the one a larger batch fills first. Each GPU is
    its figures by name (``over_window``'s, or ``vars`` of a sample or a ``GpuFigures``)."""
    known = [g for g in gpus if g.get("mem_used_bytes") is not None]
    return max(known, key=_fill) if known else None


def _fill(gpu: Mapping[str, Any]) -> tuple[float, int]:
    used, total = gpu["mem_used_bytes"], gpu.get("mem_total_bytes")
    return (used / total if total else 0.0), used


def _gpus_sum(values: Sequence[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def over_gpus(gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The job's figures over its GPUs' figures (each ``over_window``'s), by the table."""
    full = fullest(gpus)
    values: dict[str, Any] = {}
    for row in JOB_FIELDS:
        each = [g.get(row.name) for g in gpus]
        if row.job == GPUS_MEAN:
            values[row.name] = mean(each)
        elif row.job == GPUS_SUM:
            values[row.name] = _gpus_sum(each)
        else:  # FULLEST
            values[row.name] = full.get(row.name) if full is not None else None
    return values


def rounded(row: GpuField, value: Any) -> Any:
    """A figure as the JSON gives it: rounded to the row's digits, a set as a list."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return list(value)
    if row.digits is not None and isinstance(value, float):
        return round(value, row.digits)
    return value
