"""How far apart a torchrun job's ranks read without a straggler, and whether the straggler
finding names the slowed rank: the measurement behind advise/rules.py's STRAGGLER_* lines.

Each round runs 2 CPU ranks (gloo) of tests/scenarios/loops.py ``ddp`` under
``gputop-train --headless --format json``, unslowed and with one rank slowed on purpose, and
reads every status line with both ranks measured (the live window, as the advisor sees it).

    python -m benchmarks.stragglers --rounds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOPS = REPO / "tests" / "scenarios" / "loops.py"
MIN_STEPS = 5

CASES = {
    "unslowed": [],
    "rank 1 input +30 ms": ["slow_rank=1", "slow_data_ms=30"],
    "rank 0 input +15 ms": ["slow_rank=0", "slow_data_ms=15"],
    "rank 1 compute +30 ms": ["slow_rank=1", "slow_step_ms=30"],
}


def run_case(extra: list[str], steps: int) -> list[dict]:
    """The status lines (and the summary) of one monitored torchrun job."""
    command = [
        sys.executable, "-m", "gputop_train", "--headless", "--format", "json",
        "--interval", "1", "--no-record", "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(LOOPS), "ddp", "batch=8", f"steps={steps}", "step_ms=20", *extra,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(extra)}: exit {result.returncode}\n{result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def spreads(lines: list[dict]) -> tuple[list[float], list[float], set[str]]:
    """Per line with both ranks measured: data-wait max-min (points), step p50 max/min, and
    the straggler findings' titles."""
    waits, ratios, named = [], [], set()
    for line in lines:
        ranks = [r for r in line.get("ranks") or () if (r["steps"] or 0) >= MIN_STEPS]
        if len(ranks) < 2:
            continue
        wait = [r["data_wait_pct"] for r in ranks if r["data_wait_pct"] is not None]
        step = [r["step_ms_p50"] for r in ranks if r["step_ms_p50"]]
        if len(wait) == len(ranks):
            waits.append(max(wait) - min(wait))
        if len(step) == len(ranks):
            ratios.append(max(step) / min(step))
        named |= {f["title"] for f in line["findings"] if f["id"] == "ranks.straggler"}
    return waits, ratios, named


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    results: dict[str, tuple[list[float], list[float], set[str]]] = {
        name: ([], [], set()) for name in CASES
    }
    for _ in range(args.rounds):
        for name, extra in CASES.items():  # side by side, round after round
            waits, ratios, named = spreads(run_case(extra, args.steps))
            results[name][0].extend(waits)
            results[name][1].extend(ratios)
            results[name][2].update(named)
    head = ("case", "lines", "data-wait spread, points (max)", "step p50 max/min (max)", "named")
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|---|---|")
    for name, (waits, ratios, named) in results.items():
        print(
            f"| {name} | {len(waits)} | {max(waits, default=float('nan')):.1f} "
            f"| {max(ratios, default=float('nan')):.3f} | {'; '.join(sorted(named)) or 'none'} |"
        )


if __name__ == "__main__":
    main()
