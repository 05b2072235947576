"""Steady-state figures of a headless JSON run: medians over the second half of its intervals.

    python -m benchmarks.overhead.steady_state run.jsonl [run2.jsonl ...]

The first half holds start-up, compilation and the first epochs' worker start; the live
figures cover a sliding window (--window), so only later intervals are steady.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

FIELDS = (
    "samples_per_s",
    "step_ms_p50",
    "data_wait_pct",
    "gpu_time_pct",
    "gpu_util_pct",
    "sm_active_pct",
    "tensor_active_pct",
    "workers_cpu_pct",
    "main_cpu_pct",
)


def steady(path: Path) -> dict[str, float | None]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    live = [o for o in lines if o.get("type") == "status" and o.get("samples_per_s")]
    late = live[len(live) // 2 :]
    result: dict[str, float | None] = {"intervals": float(len(late))}
    for field in FIELDS:
        values = [o[field] for o in late if o.get(field) is not None]
        result[field] = round(statistics.median(values), 1) if values else None
    gib = [o["gpu_mem_used_bytes"] for o in late if o.get("gpu_mem_used_bytes")]
    result["gpu_mem_used_gib"] = round(max(gib) / 2**30, 1) if gib else None
    return result


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(Path(name).stem, json.dumps(steady(Path(name))))
