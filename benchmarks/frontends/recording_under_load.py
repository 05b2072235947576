"""How far the recording of a monitor SIGKILLed on a busy machine trails the job (issue 39).

Launches ``gputop-train --headless --record`` on tests/scenarios/loops.py ``steady`` (which
writes each step's end on its own clock), with ``--hogs`` CPU-bound processes beside it, kills
the monitor with SIGKILL after ``--seconds``, and compares the steps in the recording with the
job's own count at the kill: the steps missing and how long before the kill the last recorded
step ended. Each round prints the machine's load average.

    python -m benchmarks.frontends.recording_under_load [--hogs 8] [--seconds 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common.paths import REPO
from benchmarks.common.steps import step_ends
from gputop_train import wire
from gputop_train.record import reader

LOOPS = REPO / "tests" / "scenarios" / "loops.py"
HOG = "import time\nwhile True:\n    sum(range(10000))\n"


def one_round(workdir: Path, seconds: float) -> tuple[int, int, float, float]:
    """(the job's steps at the kill, the steps recorded, seconds between the last recorded
    step's end and the kill, the load average at the kill)."""
    times, stem = workdir / "times.bin", workdir / "run"
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", "--interval", "1",
         "--record", str(stem), "--", sys.executable, str(LOOPS), "steady", f"times={times}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 600
        while not (times.exists() and times.stat().st_size >= 8 * 20):
            if time.monotonic() > deadline or monitor.poll() is not None:
                raise RuntimeError("the job never trained")
            time.sleep(0.2)
        children = psutil.Process(monitor.pid).children(recursive=True)  # the job, the relay
        time.sleep(seconds)
        killed_at = time.perf_counter()  # CLOCK_MONOTONIC: the job's clock too
        monitor.kill()
        monitor.wait()
        load = os.getloadavg()[0]
        time.sleep(1.0)
        ends = step_ends(times)
        by_kill = sum(1 for t in ends if t <= killed_at)
        recorded: set[int] = set()
        for line in reader.read(stem.with_suffix(".jsonl")).events:
            if line.get("kind") == wire.RECORDED_STEPS:
                recorded |= {row[0] for row in line.get("rows") or ()}
        last = max(recorded) if recorded else 0
        behind_s = killed_at - ends[last - 1] if last else float("nan")
        return by_kill, len(recorded), behind_s, load
    finally:
        monitor.kill()
        for child in children:  # the job outlives its monitor by design
            with contextlib.suppress(psutil.Error):
                child.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=8, help="CPU-bound processes beside it")
    parser.add_argument("--seconds", type=float, default=30.0, help="before the SIGKILL")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    try:
        print(f"{'job steps':>9} {'recorded':>8} {'missing':>7} {'last recorded':>13} {'load':>5}")
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as scratch:
                by_kill, recorded, behind_s, load = one_round(Path(scratch), args.seconds)
            print(f"{by_kill:>9} {recorded:>8} {by_kill - recorded:>7} "
                  f"{behind_s:>11.2f} s {load:>5.1f}", flush=True)  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()


if __name__ == "__main__":
    main()
