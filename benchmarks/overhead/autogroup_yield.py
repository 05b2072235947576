"""Does the monitor yield to a CPU-saturated job under autogroup scheduling? (issue 31)

A "job" of one busy process per core runs in a session of its own, as a launched job does.
Beside it, in windows taken in ABBA order, a "monitor-like" neighbour of one busy process per
core runs in another session: niced +10 only (what the monitor did before), or niced +10 and
with its session's autogroup lowered (``monitor.priority.yield_to_job``, what it does now).
Each window's job rate (its own loop count) is divided by the mean of the quiet windows
around it (no neighbour). Prints the median ratio per arm and the range.

    python -m benchmarks.overhead.autogroup_yield --windows 6 --seconds 3
"""

from __future__ import annotations

import argparse
import mmap
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = """
import mmap, os, sys, struct, time
cores, path = int(sys.argv[1]), sys.argv[2]
for index in range(cores):
    if os.fork() == 0:
        with open(path, "r+b") as handle:
            counts = mmap.mmap(handle.fileno(), 8 * cores)
        n, next_write = 0, time.monotonic()
        while True:
            n += 1
            if n % 20000 == 0:
                counts[8 * index : 8 * index + 8] = struct.pack("q", n)
os.wait()
"""

NEIGHBOUR = """
import os, sys
from gputop_train.monitor import priority
cores, lower_group = int(sys.argv[1]), sys.argv[2] == "1"
if not lower_group:
    priority._lower_autogroup = lambda target: None  # the old behaviour: thread nice only
print(priority.yield_to_job(int(sys.argv[3])), flush=True)
for _ in range(cores - 1):
    if os.fork() == 0:
        break
while True:
    pass
"""


def job_count(counts: mmap.mmap, cores: int) -> int:
    return sum(int.from_bytes(counts[8 * i : 8 * i + 8], "little") for i in range(cores))


def window(counts: mmap.mmap, cores: int, seconds: float) -> float:
    start, t0 = job_count(counts, cores), time.monotonic()
    time.sleep(seconds)
    return (job_count(counts, cores) - start) / (time.monotonic() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=6, help="windows per neighbour arm")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    from gputop_train.monitor.priority import autogroup_in_effect

    print(f"autogroup in effect: {autogroup_in_effect()}; {cores} cores")
    path = Path(tempfile.mkdtemp()) / "counts"
    path.write_bytes(bytes(8 * cores))
    job = subprocess.Popen(
        [sys.executable, "-c", JOB, str(cores), str(path)], start_new_session=True
    )
    with path.open("r+b") as handle:
        counts = mmap.mmap(handle.fileno(), 8 * cores)
    ratios: dict[str, list[float]] = {"nice only": [], "nice + autogroup": []}
    try:
        time.sleep(1.0)
        order = ["nice only", "nice + autogroup"]
        for index in range(args.windows):
            for arm in order if index % 2 == 0 else order[::-1]:
                before = window(counts, cores, args.seconds)
                neighbour = subprocess.Popen(
                    [sys.executable, "-c", NEIGHBOUR, str(cores),
                     "1" if arm.endswith("autogroup") else "0", str(job.pid)],
                    start_new_session=True, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                assert neighbour.stdout is not None
                neighbour.stdout.readline()
                during = window(counts, cores, args.seconds)
                os.killpg(neighbour.pid, signal.SIGKILL)
                neighbour.wait()
                after = window(counts, cores, args.seconds)
                ratios[arm].append(during / ((before + after) / 2))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
    print(f"{'neighbour':<18} {'job rate: with / without (median)':>34}  range")
    for arm, values in ratios.items():
        print(f"{arm:<18} {statistics.median(values):>34.3f}  {min(values):.3f}-{max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
