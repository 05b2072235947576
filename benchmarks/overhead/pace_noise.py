"""How long a step-time comparison must run to resolve 1% on this machine (issue: cost).

Reads the job's step ends that ``attach_toggle.py --json`` kept, cuts them into windows of
each length, and pairs neighbouring windows in ABBA order as if one of each pair were
monitored (an A/A comparison: the monitor's own effect, under 0.1% of the CPU, is far below
what this measures). Per window length it prints the standard deviation of the pairs' log
ratios and what a 95% interval of +-1% on their mean would take: (1.96 sd / 0.01)^2 pairs,
in minutes of running. Where the pace of the job moves slowly (a VM whose CPU speed drifts),
short windows side by side help; where steps come in waves (DataLoader workers finishing
together), they do not.

    python -m benchmarks.overhead.pace_noise \
        docs/results/attach_toggle_pause-h200-2026-11-24T09h15.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
from pathlib import Path

from benchmarks.common.steps import mean_step_ms

WINDOWS_S = (1.0, 2.0, 4.0, 6.0, 10.0, 15.0, 20.0, 30.0)


def paired_log_ratios(ends: list[float], window_s: float) -> list[float]:
    """log(first / second) of neighbouring windows' mean step, the pair's order turned every
    other pair (ABBA), over the whole run."""
    count = int((ends[-1] - ends[0]) / window_s)
    means = [
        mean_step_ms(ends, ends[0] + k * window_s, ends[0] + (k + 1) * window_s)
        for k in range(count)
    ]
    ratios = []
    for pair in range(count // 2):
        first, second = means[2 * pair], means[2 * pair + 1]
        if first and second:
            ratio = math.log(first / second)
            ratios.append(ratio if pair % 2 == 0 else -ratio)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="attach_toggle.py --json output")
    parser.add_argument("--skip", type=float, default=10.0, help="seconds left out at the start")
    args = parser.parse_args()
    ends = json.loads(args.json.read_text())["step_ends"]
    ends = [t for t in ends if t >= ends[0] + args.skip]
    steps = [b - a for a, b in itertools.pairwise(ends)]
    deciles = statistics.quantiles(steps, n=10)
    print(
        f"{len(ends)} steps over {ends[-1] - ends[0]:.0f} s: step median "
        f"{1000 * statistics.median(steps):.1f} ms, 10th-90th percentile "
        f"{1000 * deciles[0]:.1f}-{1000 * deciles[-1]:.1f} ms, longest {1000 * max(steps):.0f} ms"
    )
    for window_s in WINDOWS_S:
        ratios = paired_log_ratios(ends, window_s)
        if len(ratios) < 3:
            continue
        spread = statistics.stdev(ratios)
        pairs = (1.96 * spread / 0.01) ** 2
        print(
            f"windows of {window_s:4.0f} s: {len(ratios):3d} pairs, sd {spread:.3f}; +-1% needs "
            f"{pairs:6.0f} pairs = {pairs * 2 * window_s / 60:5.0f} min"
        )


if __name__ == "__main__":
    main()
