"""Step times as a scenario writes them (``SCENARIO_STEP_TIMES``), and the statistics the
cost benchmarks take of them."""

from __future__ import annotations

import json
import random
import statistics
import struct
from pathlib import Path


def step_ends(times: Path) -> list[float]:
    """The job's step ends so far, as ``SCENARIO_STEP_TIMES`` holds them (float64s of the
    job's perf_counter: the same clock as a benchmark's on this machine)."""
    data = times.read_bytes()
    return list(struct.unpack(f"{len(data) // 8}d", data[: len(data) // 8 * 8]))


def rank_step_ms(truth_dir: str | Path, warmup: int) -> list[float]:
    """Every rank's step times (ms) past its first ``warmup`` steps, as
    tests/scenarios/collectives.py writes them (``truth_dir``/rank-N.json, each rank's own
    loop clock)."""
    times: list[float] = []
    for path in sorted(Path(truth_dir).glob("rank-*.json")):
        times += json.loads(path.read_text())["step_ms"][warmup:]
    return times


def mean_step_ms(ends: list[float], start: float, end: float) -> float | None:
    """Mean step time of the steps that ended in [start, end), or None with too few."""
    inside = [t for t in ends if start <= t < end]
    if len(inside) < 5:
        return None
    return (inside[-1] - inside[0]) / (len(inside) - 1) * 1000.0


def bootstrap_median_interval(values: list[float], draws: int = 4000) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of ``values``."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]
