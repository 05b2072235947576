"""Where the repository and the benchmark scenarios are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SCENARIOS = REPO / "benchmarks" / "scenarios"
