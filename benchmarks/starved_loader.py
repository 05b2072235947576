"""Do more DataLoader workers help a CPU-bound loader that other processes starve? (issue 39)

The corpus's ``input_beside_cpu_hog`` scenario with ``--read-ms 0 --cpu-ms 5``: each item
costs 5 ms of CPU in the worker, and one spinning process per core (in sessions of their own,
as other users' work) holds the cores. Runs taken in ABBA order with ``--workers A B``
workers, each its own job and hogs, no monitor; each run's rate is its steps per second after
a warm-up, read from the job's own step clock (``SCENARIO_STEP_TIMES``). Prints the median
ratio B / A and the range. The issue's case on the 2-core box was 2 workers told to go to 3
(measured 0.89-0.95x); fewer workers than cores can still gain from one per core.

    python -m benchmarks.starved_loader --workers 2 3 --pairs 3 --seconds 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "input_beside_cpu_hog.py"
STEP_TIMES_ENV = "SCENARIO_STEP_TIMES"  # benchmarks/scenarios/_scenario.py
WARMUP_S = 5.0  # workers forking, the first batches: left out of the rate


def rate(workers: int, seconds: float, folder: Path) -> float:
    """Steps per second of one run after its warm-up, by the job's own clock."""
    times = folder / f"steps-{workers}-{len(list(folder.iterdir()))}"
    env = {**os.environ, STEP_TIMES_ENV: str(times), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, str(SCENARIO), "--workers", str(workers), "--read-ms", "0",
        "--cpu-ms", "5", "--hog", str(os.cpu_count() or 1), "--seconds", str(seconds),
    ]  # fmt: skip
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=seconds + 300)
    data = times.read_bytes()
    ends = [value for (value,) in struct.iter_unpack("d", data)]
    counted = [t for t in ends if t >= ends[0] + WARMUP_S]
    if len(counted) < 2:
        return 0.0
    return (len(counted) - 1) / (counted[-1] - counted[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs=2, default=(2, 3), metavar=("A", "B"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    a, b = args.workers
    ratios = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for index in range(args.pairs):
            arms = (a, b) if index % 2 == 0 else (b, a)
            rates = {workers: rate(workers, args.seconds, folder) for workers in arms}
            print(f"pair {index + 1}: {a} workers {rates[a]:.2f} steps/s, {b}: {rates[b]:.2f}")
            ratios.append(rates[b] / rates[a] if rates[a] else float("nan"))
    print(
        f"{b} workers / {a}: median {statistics.median(ratios):.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f} ({os.cpu_count()} cores)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
