"""How Prometheus scrapes the job's nodes, as the job view needs it: how far apart (its
windows no shorter: cli/job.py), and for a node whose scrape failed, since when and why
(its row "not answering since HH:MM:SS (why)": judge.py)."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from typing import Any

Query = Callable[[str], list[dict[str, Any]]]  # an instant query's result (PrometheusSource)


def sample_times(query: Query, selector: str, span: str) -> dict[str, tuple[str, list[float]]]:
    """Each host's scrape target (``instance``) and the times of its samples of ``selector``
    over the last ``span`` (one series a host: a range query's raw samples)."""
    found: dict[str, tuple[str, list[float]]] = {}
    for row in query(f"{selector}[{span}]"):
        labels = row["metric"]
        times = sorted(float(t) for t, _ in row.get("values", ()))
        if times:
            found[labels.get("host", "")] = (labels.get("instance", ""), times)
    return found


def spacing_s(times: dict[str, tuple[str, list[float]]]) -> float | None:
    """The median time between a host's samples, to 0.1 s (Prometheus's jitter of a few ms
    off); None where no host has two."""
    gaps = [b - a for _, each in times.values() for a, b in itertools.pairwise(each)]
    return round(statistics.median(gaps), 1) if gaps else None


def target_errors(targets: list[dict[str, Any]]) -> dict[str, str]:
    """Each scrape target that is down (``/api/v1/targets``' active ones), by ``instance``: its
    last error's last words (``connection refused``, ``context deadline exceeded``)."""
    return {
        t["labels"].get("instance", ""): (t.get("lastError") or "down").rsplit(": ", 1)[-1]
        for t in targets
        if t.get("health") == "down"
    }
