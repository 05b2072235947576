"""What benchmarks/ranks/gpu_node.sh brought back, set against nvidia-smi's own per-GPU readings:
for each job, the GPUs the monitor took as the job's, its utilization, memory and power
beside nvidia-smi's for those GPUs alone over the same windows, its headline, and its MFU
beside the script's own meter (docs/gpus.md).

    python -m benchmarks.ranks.gpu_node_report DIR        # DIR: the unpacked gputop-node/
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# Status lines judged: the job's steady part (the monitor's first window covers its start).
STEADY_AFTER_S = 15.0
RUNS = (
    ("a_gpu0_bound", "A"),
    ("a_cvd1_input", "A"),
    ("b_shared_gpu0", "B"),
    ("c_ddp", "c_ddp"),
    ("c_fsdp2", "c_fsdp2"),
    ("d_cvd1_bound", "D"),
)


def smi_readings(path: Path) -> list[tuple[float, int, float, float, float]]:
    """(t, index, util %, memory MiB, power W) per nvidia-smi line."""
    rows = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 7:
            continue
        try:
            stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
            rows.append(
                (
                    stamp.timestamp(),
                    int(parts[1]),
                    float(parts[3]),
                    float(parts[4]),
                    float(parts[5]),
                )
            )
        except ValueError:
            continue
    return rows


def statuses(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if item.get("type") == "status":
                out.append(item)
    return out


def meter(directory: Path, name: str) -> list[float]:
    """The script's own TFLOP/s per GPU, each 5 s line after the first."""
    text = "".join(
        (directory / f"{name}.{ext}").read_text(errors="replace")
        for ext in ("json", "err")
        if (directory / f"{name}.{ext}").exists()
    )
    found = [float(m) for m in re.findall(r"([\d.]+) TFLOP/s/GPU", text)]
    return found[1:] if len(found) > 1 else found


def report(directory: Path, name: str, smi_name: str) -> dict[str, Any]:
    lines = [s for s in statuses(directory / f"{name}.json") if s.get("job_running")]
    smi = smi_readings(directory / f"{smi_name}.smi.csv")
    steady = [
        s for s in lines if s["elapsed_s"] >= STEADY_AFTER_S and s.get("gpu_util_pct") is not None
    ]
    diffs, mem_diffs, power_diffs = [], [], []
    for s in steady:
        job = s["job_gpus"]["indices"]
        window = [r for r in smi if s["t"] - s["window_s"] < r[0] <= s["t"] and r[1] in job]
        if not window:
            continue
        diffs.append(s["gpu_util_pct"] - statistics.fmean(r[2] for r in window))
        latest_t = max(r[0] for r in window)
        latest = [r for r in window if r[0] >= latest_t - 0.6]
        if s.get("gpu_mem_used_bytes") is not None:
            fullest = max(r[3] for r in latest)
            mem_diffs.append(s["gpu_mem_used_bytes"] / 2**20 - fullest)
        if s.get("gpu_power_w") is not None:
            per_gpu = {}
            for r in latest:
                per_gpu[r[1]] = r[4]
            power_diffs.append(s["gpu_power_w"] - sum(per_gpu.values()))
    last = steady[-1] if steady else (lines[-1] if lines else {})
    others = {
        g["index"]: [(o["pid"], o["user"], o["sm_pct"], o["mem_bytes"]) for o in g["others"]]
        for g in last.get("gpus", [])
        if g["others"]
    }
    findings = last.get("findings") or []
    mfu = last.get("mfu") or {}
    script = meter(directory, name)
    return {
        "run": name,
        "job_gpus": last.get("job_gpus"),
        "status_lines": len(steady),
        "util_pct": last.get("gpu_util_pct"),
        "util_minus_smi_max_abs": _max_abs(diffs, 2),
        "util_minus_smi_mean": round(statistics.fmean(diffs), 2) if diffs else None,
        "mem_minus_smi_mib_max_abs": round(
            max((abs(d) for d in mem_diffs), default=float("nan")), 1
        ),
        "power_minus_smi_w_mean": round(statistics.fmean(power_diffs), 1) if power_diffs else None,
        "headline": findings[0]["id"] if findings else None,
        "headline_title": findings[0]["title"] if findings else None,
        "finding_ids": [f["id"] for f in findings],
        "others": others,
        "mfu_pct": last.get("mfu_pct"),
        "achieved_tflops": last.get("achieved_tflops"),
        "per_gpu_tflops": mfu.get("per_gpu_tflops"),
        "mfu_gpus": mfu.get("gpus"),
        "mfu_ranks": mfu.get("ranks"),
        "mfu_na": mfu.get("na_reason"),
        "meter_tflops_per_gpu": round(statistics.fmean(script), 1) if script else None,
    }


def _max_abs(values: list[float], digits: int) -> float | None:
    return round(max(abs(v) for v in values), digits) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", type=Path)
    args = parser.parse_args()
    for name, smi_name in RUNS:
        if (args.directory / f"{name}.json").exists():
            print(json.dumps(report(args.directory, name, smi_name)))


if __name__ == "__main__":
    main()
