"""Where the headless monitor's CPU goes, thread by thread, and what its hook costs inside the
job: each thread's exact CPU time and times scheduled onto a CPU (its wake-ups), from
``/proc/PID/task/TID/schedstat``, for the monitor and for the job it watches. Threads are
named by ``py-spy dump`` (Python threads; the rest read "native"). /proc's clock ticks are
10 ms: too coarse for threads that use a fraction of a percent.

    python -m benchmarks.overhead.thread_costs -- benchmarks/scenarios/input_idle_cores.py --small
    python -m benchmarks.overhead.thread_costs --tree .ab/prev -- SCENARIO  # other tree

``--tree`` runs the package (and the script, if relative) of another checkout, such as a
``git archive`` of an earlier commit: run both in one sitting and compare.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common.paths import REPO
from benchmarks.common.threads import schedstat, thread_names


def costs(pid: int, before: dict[int, tuple[int, int]], seconds: float) -> dict[str, Any]:
    """% of one core and wake-ups a second per thread name (same names summed)."""
    names = thread_names(pid)
    totals: dict[str, list[float]] = {}
    for tid, (run_ns, slices) in schedstat(pid).items():
        run_before, slices_before = before.get(tid, (0, 0))
        name = names.get(tid, "native")
        total = totals.setdefault(name, [0.0, 0.0])
        total[0] += (run_ns - run_before) / 1e9 / seconds * 100.0
        total[1] += (slices - slices_before) / seconds
    ordered = sorted(totals.items(), key=lambda kv: -kv[1][0])
    return {
        name: {"cpu_pct": round(c, 3), "wakeups_per_s": round(w, 1)} for name, (c, w) in ordered
    }


def the_job(monitor: psutil.Process, script: str) -> psutil.Process:
    for child in monitor.children(recursive=True):
        if any(script in part for part in child.cmdline()):
            return child
    raise SystemExit(f"no job running {script} under the monitor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--measure", type=float, default=30.0)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS")
    args = parser.parse_args()
    script = [a for a in args.script if a != "--"]
    tree = args.tree.resolve()
    script[0] = str((tree / script[0]) if not Path(script[0]).is_absolute() else script[0])
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])),
    )
    command = [
        sys.executable,
        "-m",
        "gputop_train",
        "--headless",
        "--no-record",
        "--interval",
        "2",
        "--",
        sys.executable,
        *script,
    ]
    monitor = subprocess.Popen(
        command,
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    job: psutil.Process | None = None
    try:
        time.sleep(args.warmup)
        job = the_job(psutil.Process(monitor.pid), script[0])
        before = {"monitor": schedstat(monitor.pid), "job": schedstat(job.pid)}
        time.sleep(args.measure)
        report = {
            "tree": str(tree),
            "script": script,
            "measured_s": args.measure,
            "monitor": costs(monitor.pid, before["monitor"], args.measure),
            "job": costs(job.pid, before["job"], args.measure),
        }
        print(json.dumps(report), flush=True)
    finally:
        os.killpg(monitor.pid, signal.SIGINT)  # the monitor's and the job's group: Ctrl+C
        try:
            monitor.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(monitor.pid, signal.SIGKILL)
        if job is not None and job.is_running():  # never leave the job behind
            job.kill()


if __name__ == "__main__":
    main()
