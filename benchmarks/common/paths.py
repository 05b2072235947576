"""Where the repository and the benchmark scenarios are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SCENARIOS = REPO / "benchmarks" / "scenarios"
# Every core busy building batches: the job whose pace the monitor's cost is measured against.
SATURATED_SCENARIO = SCENARIOS / "input_all_cores_busy.py"
