"""What the hook and the monitor cost a job that already uses every core (issue: cost).

The user who opens this tool is often the one whose input pipeline saturates the CPU: there
the monitor competes with the DataLoader workers. Three arms run the same scenario in turn,
for several rounds, the arm order rotating each round so that the machine's drift cancels:

- ``plain``: the script alone;
- ``hook``: the script under the hook (its per-step work in the main process, and whatever
  it does inside the DataLoader workers), no monitor;
- ``monitored``: ``gputop-train --headless --no-record`` on the script (the hook, plus the
  monitor's samplers and the socket traffic); ``monitored-no-nice`` adds ``--no-nice``.

Each run's figure is its mean step time over the measured seconds, from the job's own clock
(``SCENARIO_STEP_TIMES``: each step's end, written by the scenario). Per round, each arm is
divided by that round's plain run; the report gives the median ratio over rounds, its range,
and a bootstrap 95% interval of the median. The differences between arms attribute the cost:
hook / plain is the hook's, monitored / hook the monitor's.

Where runs spread more than the effect (on the H200 VM one arm's runs spread 70-111 ms), the
ratio cannot resolve 1%, so the monitored arms also account for the CPU: the monitor
process's own CPU seconds over all the CPU seconds the run used (monitor, job and workers).
On a saturated box the job can lose at most the CPU the monitor took, so that share bounds
the monitor's cost to the job, and it is measured to a small fraction of a percent in every
run. Each run is printed as it ends (JSON lines on stdout), so a run cut short keeps them.

    python -m benchmarks.overhead.saturated_cost --rounds 8 --warmup 10 --measure 30
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.common.paths import REPO, SATURATED_SCENARIO
from benchmarks.common.steps import bootstrap_median_interval, step_ends
from gputop_train import wire
from gputop_train.job.launched import hook_environment

ARMS = ("plain", "hook", "monitored", "monitored-no-nice")


def run_arm(arm: str, script: list[str], seconds: float, times: Path) -> tuple[float, float]:
    """One run of ``arm`` for ``seconds``, its step ends appended to ``times``; returns the
    CPU seconds of the monitor process alone (0 without one) and of the whole run."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_TRAIN_")}
    base["SCENARIO_STEP_TIMES"] = str(times)
    job = [*script, "--seconds", str(seconds)]
    if arm == "plain":
        command, env = [sys.executable, *job], base
    elif arm == "hook":
        command, env = [sys.executable, *job], hook_environment(base)
    else:
        command = [sys.executable, "-m", "gputop_train", "--headless", "--no-record"]
        command += ["--format", "json"]
        if arm == "monitored-no-nice":
            command.append("--no-nice")
        command, env = [*command, *job], base
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    own = 0.0  # the monitor's CPU without its children: read until it exits
    deadline = time.monotonic() + seconds + 300
    while process.poll() is None and time.monotonic() < deadline:
        if arm.startswith("monitored"):
            with contextlib.suppress(psutil.Error):
                times_now = psutil.Process(process.pid).cpu_times()
                own = times_now.user + times_now.system
        time.sleep(0.25)
    if process.poll() is None:
        process.kill()
        raise RuntimeError(f"{arm} did not end within {seconds + 300:.0f} s")
    if process.returncode != 0:
        raise RuntimeError(f"{arm} exited {process.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return own, total


def mean_step_ms(times: Path, warmup_s: float) -> float:
    """Mean step time after the warm-up, from the job's clock."""
    ends = step_ends(times)
    measured = [t for t in ends if t >= ends[0] + warmup_s]
    if len(measured) < 10:
        raise RuntimeError(f"only {len(measured)} steps after the warm-up: measure longer")
    return (measured[-1] - measured[0]) / (len(measured) - 1) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out per run")
    parser.add_argument("--measure", type=float, default=30.0, help="seconds measured per run")
    parser.add_argument("--arms", default=",".join(ARMS[:3]), help=f"of {', '.join(ARMS)}")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument(
        "--deadline", type=float, default=0.0, help="seconds: start no round that would end later"
    )
    parser.add_argument("script", nargs="*", help="the scenario and its flags")
    args = parser.parse_args()
    arms = args.arms.split(",")
    if arms[0] != "plain" or not set(arms) <= set(ARMS):
        parser.error(f"--arms: plain first, then any of {', '.join(ARMS[1:])}")
    script = args.script or [str(SATURATED_SCENARIO)]
    runs: dict[str, list[float]] = {arm: [] for arm in arms}
    # The monitor's share of all the CPU a run used: monitored arms only.
    shares: dict[str, list[float]] = {arm: [] for arm in arms if arm.startswith("monitored")}
    started, seconds = time.monotonic(), args.warmup + args.measure
    with tempfile.TemporaryDirectory() as scratch:
        os.environ[wire.RUNTIME_DIR_ENV] = str(Path(scratch) / "run")
        for round_index in range(args.rounds):
            # A round that would not end within --deadline is not started: whole rounds only.
            spent = time.monotonic() - started
            if args.deadline and spent + spent / max(round_index, 1) > args.deadline:
                break
            shift = round_index % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                times = Path(scratch) / f"{arm}-{round_index}.bin"
                monitor_cpu_s, all_cpu_s = run_arm(arm, script, seconds, times)
                runs[arm].append(mean_step_ms(times, args.warmup))
                if arm in shares and all_cpu_s:
                    shares[arm].append(100.0 * monitor_cpu_s / all_cpu_s)
                line = {"round": round_index + 1, "arm": arm, "mean_step_ms": runs[arm][-1]}
                line.update(monitor_cpu_s=monitor_cpu_s, all_cpu_s=all_cpu_s)
                print(json.dumps(line), flush=True)
    rounds = len(runs["plain"])
    runs = {arm: values[:rounds] for arm, values in runs.items()}  # whole rounds only
    print(f"{'arm':<18} {'mean step ms (median)':>22} {'/ plain':>8} {'range':>15} {'95% CI':>15}")
    for arm in arms:
        ratios = [value / plain for value, plain in zip(runs[arm], runs["plain"], strict=True)]
        low, high = bootstrap_median_interval(ratios)
        print(
            f"{arm:<18} {statistics.median(runs[arm]):22.3f} {statistics.median(ratios):8.4f} "
            f"{min(ratios):7.4f}-{max(ratios):<7.4f} {low:7.4f}-{high:<7.4f}"
        )
    for arm in arms[1:]:
        if shares.get(arm):
            print(
                f"{arm}: the monitor's share of all the run's CPU, median "
                f"{statistics.median(shares[arm]):.3f}%, highest {max(shares[arm]):.3f}% "
                f"({len(shares[arm])} runs)"
            )
    if args.json:
        args.json.write_text(
            json.dumps({"script": script, "runs_ms": runs, "monitor_cpu_pct": shares}, indent=2)
        )


if __name__ == "__main__":
    main()
