"""Does attaching from the job's own terminal slow the job? (issue 39)

``python train.py &`` then ``gputop-train attach PID`` from the same terminal puts the job in
the monitor's session, so in its autogroup. A "job" of one busy process per core runs in a
session (the terminal); "other users" keep one busy process per core in another session. In
windows taken in ABBA order, a monitor-like process in the job's session yields to the job
(``monitor.priority.yield_to_job``, then idles as a monitor mostly does): as now (the shared
autogroup left alone, only the monitor's own threads niced) or as before (the shared autogroup
lowered to nice 10). Each window's job rate (its own loop count) is divided by the mean of the
windows just before and after it (no monitor). Prints the median ratio per arm and the range.

    python -m benchmarks.overhead.attach_same_session --windows 4 --seconds 2
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

from benchmarks.overhead.autogroup_yield import JOB, window

# A monitor in the terminal's session: yields to the job, says so, then idles until killed.
MONITOR = """
import sys, time
from gputop_train.monitor import priority
if sys.argv[1] == "before":
    priority.shares_autogroup = lambda pid: False  # the old behaviour: lower it regardless
print(priority.yield_to_job(int(sys.argv[2])), flush=True)
time.sleep(3600)
"""

# The terminal: starts the job in its own session, then a monitor per line on stdin ("now",
# "before"), or ends the running one ("end"); reports its session's autogroup nice.
TERMINAL = """
import os, subprocess, sys
cores, path, monitor_code = int(sys.argv[1]), sys.argv[2], sys.argv[3]
job = subprocess.Popen([sys.executable, "-c", sys.argv[4], str(cores), path])
print(job.pid, flush=True)
monitor = None
for line in sys.stdin:
    arm = line.strip()
    if arm == "end":
        monitor.terminate()
        monitor.wait()
    else:
        monitor = subprocess.Popen(
            [sys.executable, "-c", monitor_code, arm, str(job.pid)], stdout=subprocess.PIPE,
            text=True,
        )
        monitor.stdout.readline()
    print(open("/proc/self/autogroup").read().split("nice")[1].strip(), flush=True)
"""

SPIN = """
import os, sys
for _ in range(int(sys.argv[1]) - 1):
    if os.fork() == 0:
        break
while True:
    pass
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=4, help="windows per arm")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    from gputop_train.monitor.priority import autogroup_in_effect

    print(f"autogroup in effect: {autogroup_in_effect()}; {cores} cores")
    path = Path(tempfile.mkdtemp()) / "counts"
    path.write_bytes(bytes(8 * cores))
    terminal = subprocess.Popen(
        [sys.executable, "-c", TERMINAL, str(cores), str(path), MONITOR, JOB],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    others = subprocess.Popen([sys.executable, "-c", SPIN, str(cores)], start_new_session=True)
    assert terminal.stdin is not None and terminal.stdout is not None
    terminal.stdout.readline()  # the job's PID: it runs

    def ask(line: str) -> str:
        terminal.stdin.write(line + "\n")  # type: ignore[union-attr]
        terminal.stdin.flush()  # type: ignore[union-attr]
        return terminal.stdout.readline().strip()  # type: ignore[union-attr]

    with path.open("r+b") as handle:
        counts = mmap.mmap(handle.fileno(), 8 * cores)
    ratios: dict[str, list[float]] = {"now": [], "before": []}
    niceness: dict[str, set[str]] = {"now": set(), "before": set()}
    try:
        time.sleep(1.0)
        order = ["now", "before"]
        for index in range(args.windows):
            for arm in order if index % 2 == 0 else order[::-1]:
                quiet = window(counts, cores, args.seconds)
                niceness[arm].add(ask(arm))
                during = window(counts, cores, args.seconds)
                ask("end")
                time.sleep(0.3)  # the guard puts the session back
                after = window(counts, cores, args.seconds)
                ratios[arm].append(during / ((quiet + after) / 2))
    finally:
        os.killpg(others.pid, signal.SIGKILL)
        os.killpg(terminal.pid, signal.SIGKILL)
    print(f"{'monitor':<8} {'session nice':>12} {'job rate: attached / not (median)':>36}  range")
    for arm, values in ratios.items():
        nice = ",".join(sorted(niceness[arm]))
        print(
            f"{arm:<8} {nice:>12} {statistics.median(values):>36.3f}  "
            f"{min(values):.3f}-{max(values):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
