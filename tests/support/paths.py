"""Where the repository and the test scenarios are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SCENARIOS = REPO / "tests" / "scenarios" / "loops.py"
BENCHMARK_SCENARIOS = REPO / "benchmarks" / "scenarios"
