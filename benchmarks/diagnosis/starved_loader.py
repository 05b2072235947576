"""Do more DataLoader workers help a CPU-bound loader that other processes starve? (issue 39)

The corpus's ``input_beside_cpu_hog`` scenario with ``--read-ms 0 --cpu-ms 5``: each item
costs 5 ms of CPU in the worker, and one spinning process per core (in sessions of their own,
as other users' work) holds the cores. Runs taken in ABBA order with ``--workers A B``
workers, each its own job and hogs, no monitor; each run's rate is its steps per second after
a warm-up, read from the job's own step clock (``SCENARIO_STEP_TIMES``). Prints the median
ratio B / A and the range. The issue's case on the 2-core box was 2 workers told to go to 3
(measured 0.89-0.95x); fewer workers than cores can still gain from one per core.

    python -m benchmarks.diagnosis.starved_loader --workers 2 3 --pairs 3 --seconds 20

``--give-cores`` measures instead what the advice for this case says to do ("give the job
cores of its own"): the same workers with the hogs and without them, ABBA, after one run
under ``gputop-train --headless`` that reads the advice's headline and its stated gain
("up to 1.9x"), so that the measured gain is set beside the one the advice states.

    python -m benchmarks.diagnosis.starved_loader --workers 2 2 --give-cores --pairs 3 --seconds 20

``--by-hand SCRIPT`` applies the advice by hand to a loader with no workers (issue 46) on the
corpus's scenario (``scenario``: the same CPU-bound Dataset), on a script not written for
the monitor (``imagenet``: benchmarks/autopilot/any_script/imagenet_style.py, pytorch/examples'
loop on FakeData, mobilenet_v3_small, batch 16) or on the CPU demo (``demo``). Each ARM is
``WORKERS:HOGS``; every run goes under ``gputop-train --headless --format json`` (both arms
alike), its rate is the summary's phase 1 samples/s (the hook's step clock, warm-up
excluded), and the run beside hogs prints the headline the monitor gave. The hogs are
spinning processes in sessions of their own, started for each run and stopped after it.

    python -m benchmarks.diagnosis.starved_loader --by-hand scenario --arms 0:2 0:0 --pairs 2
    python -m benchmarks.diagnosis.starved_loader --by-hand imagenet --arms 0:2 1:2 --pairs 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "input_beside_cpu_hog.py"
STEP_TIMES_ENV = "SCENARIO_STEP_TIMES"  # benchmarks/scenarios/_scenario.py
WARMUP_S = 5.0  # workers forking, the first batches: left out of the rate


def scenario(workers: int, seconds: float, hogs: int) -> list[str]:
    return [
        str(SCENARIO), "--workers", str(workers), "--read-ms", "0", "--cpu-ms", "5",
        "--hog", str(hogs), "--seconds", str(seconds),
    ]  # fmt: skip


def rate(workers: int, seconds: float, folder: Path, hogs: int | None = None) -> float:
    """Steps per second of one run after its warm-up, by the job's own clock."""
    times = folder / f"steps-{workers}-{len(list(folder.iterdir()))}"
    env = {**os.environ, STEP_TIMES_ENV: str(times), "OMP_NUM_THREADS": "1"}
    hogs = os.cpu_count() or 1 if hogs is None else hogs
    command = [sys.executable, *scenario(workers, seconds, hogs)]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=seconds + 300)
    data = times.read_bytes()
    ends = [value for (value,) in struct.iter_unpack("d", data)]
    counted = [t for t in ends if t >= ends[0] + WARMUP_S]
    if len(counted) < 2:
        return 0.0
    return (len(counted) - 1) / (counted[-1] - counted[0])


def advice(workers: int, seconds: float) -> dict:
    """The headline finding the monitor gives the starved loader (its last status line)."""
    command = [
        sys.executable, "-m", "gputop_train", "--headless", "--format", "json", "--",
        sys.executable, *scenario(workers, seconds, os.cpu_count() or 1),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    status = [line for line in lines if line.get("findings")]
    return status[-1]["findings"][0] if status else {}


REPO = Path(__file__).resolve().parents[1]
HOG = "import time\nwhile True:\n    time.monotonic()\n"
BY_HAND = {
    "scenario": lambda workers: [
        str(SCENARIO), "--workers", str(workers), "--read-ms", "0", "--cpu-ms", "5", "--hog", "0",
    ],
    "imagenet": lambda workers: [
        str(REPO / "benchmarks" / "autopilot_any" / "imagenet_style.py"),
        "-j", str(workers), "-a", "mobilenet_v3_small", "-b", "16", "--meter-s", "0",
    ],
    "demo": lambda workers: [str(REPO / "demos" / "resnet.py"), "--workers", str(workers)],
}  # fmt: skip


def monitored(script: str, workers: int, hogs: int, seconds: float) -> tuple[float, dict]:
    """One run under the monitor beside ``hogs`` spinning processes: (phase 1 samples/s,
    the last headline the monitor gave while the job ran)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(hogs)
    ]
    command = [sys.executable, "-m", "gputop_train", "--headless", "--format", "json", "--"]
    command += [sys.executable, *BY_HAND[script](workers)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        monitor = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        try:
            out, _ = monitor.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            monitor.send_signal(signal.SIGINT)  # passed on to the job, which stops
            out, _ = monitor.communicate(timeout=120)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    summary: dict = next((line for line in lines if line.get("type") == "summary"), {})
    phases = summary.get("phases") or [{}]
    rate = phases[0].get("samples_per_s") or 0.0
    said = [line["findings"][0] for line in lines if line.get("findings") and line["job_running"]]
    return rate, (said[-1] if said else {})


def by_hand(script: str, arms: list[str], pairs: int, seconds: float) -> int:
    """Arm B against arm A, ABBA, each run monitored."""
    a, b = (tuple(int(x) for x in arm.split(":")) for arm in arms)
    ratios = []
    for index in range(pairs):
        rates = {}
        for arm in (a, b) if index % 2 == 0 else (b, a):
            rates[arm] = rate, headline = monitored(script, arm[0], arm[1], seconds)
            print(f"pair {index + 1}: {arm[0]} workers beside {arm[1]} hogs: "
                  f"{rate:.2f} samples/s", flush=True)  # fmt: skip
            if arm[1]:
                print(f"  headline: {headline.get('id')}: {headline.get('expected_gain')}: "
                      f"{headline.get('action')}", flush=True)  # fmt: skip
        rate_a, rate_b = rates[a][0], rates[b][0]
        ratios.append(rate_b / rate_a if rate_a else float("nan"))
        print(f"pair {index + 1}: {arms[1]} / {arms[0]} = {ratios[-1]:.3f}", flush=True)
    print(
        f"{script}: {arms[1]} / {arms[0]} (workers:hogs): median {statistics.median(ratios):.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f} ({os.cpu_count()} cores, {pairs} pairs of "
        f"{seconds:g} s runs)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs=2, default=(2, 3), metavar=("A", "B"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--give-cores", action="store_true", help="hogs against none")
    parser.add_argument("--by-hand", choices=sorted(BY_HAND), help="a 0-worker loader, monitored")
    parser.add_argument("--arms", nargs=2, default=("0:2", "0:0"), metavar=("A", "B"))
    args = parser.parse_args()
    if args.by_hand:
        return by_hand(args.by_hand, list(args.arms), args.pairs, args.seconds)
    if args.give_cores:
        return give_cores(args.workers[0], args.pairs, args.seconds)
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


def give_cores(workers: int, pairs: int, seconds: float) -> int:
    """The advice's stated gain, then the job with the hogs against without them, ABBA."""
    headline = advice(workers, seconds)
    print(f"advice: {headline.get('id')}: {headline.get('title')}; "
          f"{headline.get('expected_gain')}: {headline.get('action')}", flush=True)  # fmt: skip
    ratios = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        hogs = os.cpu_count() or 1
        for index in range(pairs):
            arms = (hogs, 0) if index % 2 == 0 else (0, hogs)
            rates = {n: rate(workers, seconds, folder, hogs=n) for n in arms}
            print(f"pair {index + 1}: beside {hogs} hogs {rates[hogs]:.2f} steps/s, "
                  f"alone {rates[0]:.2f}", flush=True)  # fmt: skip
            ratios.append(rates[0] / rates[hogs] if rates[hogs] else float("nan"))
    print(
        f"given its cores / beside the hogs: median {statistics.median(ratios):.3f}, range "
        f"{min(ratios):.3f}-{max(ratios):.3f} ({os.cpu_count()} cores, {workers} workers); "
        f"the advice stated {headline.get('expected_gain')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
