"""What the hook and its monitor cost a fast CPU-bound job on a busy box (issue 46).

A ~2.2 ms CPU-bound step beside 4 CPU hogs ran at 0.87x of itself unmonitored. This runs one
CPU-bound training loop (one torch thread, a fixed number of matmuls a step, calibrated once
to ``--step-ms`` with no hog) for each of four cases, steps of ~2.2 ms and ~20 ms beside 0 and
4 hogs, and in each case two arms in ABBA order for ``--rounds`` pairs (AB, BA, AB, BA):

- ``plain``: the job alone, started in a session of its own (as the launcher starts it);
- ``monitored``: ``gputop-train --headless --no-record`` on the same job (the hook, the
  monitor, the socket traffic);
- ``hook`` (with ``--arms plain,hook,monitored``): the job under the hook's environment with
  no monitor, so that the hook's own per-step work in the job's process is told apart from
  what the monitor's processes take.

The hogs (``while True: pass`` processes, each in its own session) run for one run only and are
killed at its end (and bounded by ``timeout`` in any case). A run's figure is its mean step
time over the measured seconds after ``--warmup`` (warm-up excluded), from the job's own clock.
Per pair the ratio is plain / monitored speed (monitored step time over plain's, inverted):
1.0 is free, 0.99 a 1% cost. Prints one JSON line per run, then per case the median ratio of
its rounds and their range; ``--json`` keeps every run.

    heavy -x .venv/bin/python -m benchmarks.overhead.busy_box --rounds 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.abba import abba_rounds
from benchmarks.common.hogs import cpu_hogs
from benchmarks.common.paths import REPO
from benchmarks.common.provenance import write_result
from benchmarks.common.steps import step_ends
from gputop_train.job.launched import hook_environment

# The job: a Linear layer's forward, backward and SGD step, ``reps`` times a step, on one
# thread; each step's end (perf_counter) appended to STEP_TIMES as a float64.
JOB = """
import os, struct, sys, time, torch
torch.set_num_threads(1)
reps, seconds = int(sys.argv[1]), float(sys.argv[2])
model = torch.nn.Linear(256, 256)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256)
out = open(os.environ["STEP_TIMES"], "ab", buffering=0)
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    for _ in range(reps):
        model(x).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    out.write(struct.pack("d", time.perf_counter()))
"""
ARMS = ("plain", "hook", "monitored")


def run(arm: str, reps: int, hogs: int, seconds: float, times: Path) -> None:
    """One run of ``arm`` beside ``hogs`` CPU hogs, its step ends written to ``times``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_TRAIN_")}
    env["STEP_TIMES"] = str(times)
    job = [sys.executable, "-c", JOB, str(reps), str(seconds)]
    if arm == "monitored":
        job = [sys.executable, "-m", "gputop_train", "--headless", "--no-record", "--", *job]
    elif arm == "hook":
        env = hook_environment(env)
    with cpu_hogs(hogs, seconds + 60):
        process = subprocess.run(
            job, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            timeout=seconds + 120, start_new_session=True,
        )  # fmt: skip
    if process.returncode != 0:
        raise RuntimeError(f"{arm} exited {process.returncode}: {process.stderr[-500:]!r}")


def mean_step_ms(times: Path, warmup_s: float) -> float:
    ends = step_ends(times)
    measured = [t for t in ends if t >= ends[0] + warmup_s]
    if len(measured) < 10:
        raise RuntimeError(f"only {len(measured)} steps after the warm-up: measure longer")
    return (measured[-1] - measured[0]) / (len(measured) - 1) * 1000.0


def calibrate(step_ms: float, scratch: Path) -> int:
    """The matmul repetitions a step needs for ``step_ms`` on this box, with no hog."""
    times = scratch / "calibrate.bin"
    times.unlink(missing_ok=True)
    run("plain", 1, 0, 3.0, times)
    one = mean_step_ms(times, 1.0)
    return max(1, round(step_ms / one))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="pairs, in ABBA order")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds left out per run")
    parser.add_argument("--measure", type=float, default=6.0, help="seconds measured per run")
    parser.add_argument("--step-ms", default="2.2,20", help="step times of the cases")
    parser.add_argument("--hogs", default="0,4", help="CPU hogs beside the job, per case")
    parser.add_argument("--arms", default="plain,monitored", help=f"of {', '.join(ARMS)}")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args()
    arms = tuple(args.arms.split(","))
    if arms[0] != "plain" or not set(arms) <= set(ARMS):
        parser.error(f"--arms: plain first, then any of {', '.join(ARMS[1:])}")
    seconds = args.warmup + args.measure
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        os.environ["GPUTOP_TRAIN_RUNTIME_DIR"] = str(scratch / "run")
        for step_ms in map(float, args.step_ms.split(",")):
            reps = calibrate(step_ms, scratch)
            for hogs in map(int, args.hogs.split(",")):

                def measure(
                    arm: str,
                    index: int,
                    step_ms: float = step_ms,
                    reps: int = reps,
                    hogs: int = hogs,
                ) -> None:
                    times = scratch / f"{step_ms}-{hogs}-{index}-{arm}.bin"
                    started = time.time()
                    run(arm, reps, hogs, seconds, times)
                    line = {
                        "step_ms_target": step_ms, "reps": reps, "hogs": hogs, "pair": index,
                        "arm": arm, "started": started, "load1": os.getloadavg()[0],
                        "mean_step_ms": mean_step_ms(times, args.warmup),
                    }  # fmt: skip
                    results.append(line)
                    print(json.dumps(line), flush=True)

                abba_rounds(arms, args.rounds, measure)  # plain, monitored, monitored, plain
    print(f"{'step':>6} {'hogs':>4} {'arm':>9} {'plain ms':>9} {'speed ratio':>11} {'range':>13} "
          f"{'pairs':>5}")  # fmt: skip
    cases = sorted({(r["step_ms_target"], r["hogs"]) for r in results})
    summary = []
    for step_ms, hogs in cases:
        case = [r for r in results if (r["step_ms_target"], r["hogs"]) == (step_ms, hogs)]
        by_pair: dict[int, dict[str, float]] = {}
        for r in case:
            by_pair.setdefault(r["pair"], {})[r["arm"]] = r["mean_step_ms"]
        plain = statistics.median(p["plain"] for p in by_pair.values())
        for arm in arms[1:]:
            ratios = [p["plain"] / p[arm] for p in by_pair.values() if "plain" in p and arm in p]
            line = {"step_ms": step_ms, "hogs": hogs, "arm": arm, "plain_ms": plain}
            summary.append({**line, "ratios": ratios})
            print(
                f"{step_ms:6.1f} {hogs:4d} {arm:>9} {plain:9.3f} {statistics.median(ratios):11.4f} "
                f"{min(ratios):6.4f}-{max(ratios):<6.4f} {len(ratios):5d}"
            )
    if args.json:
        write_result(args.json, json.dumps({"runs": results, "cases": summary}, indent=2))


if __name__ == "__main__":
    main()
