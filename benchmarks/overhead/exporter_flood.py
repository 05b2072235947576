"""What a flood of idle connections to the Prometheus endpoint costs a CPU-saturated job
(issue 31 point 1), side by side with unflooded windows of the same run.

The job (benchmarks/scenarios/input_all_cores_busy.py: a DataLoader worker on every core)
runs under ``gputop-train --headless --prometheus 127.0.0.1:0``. Windows alternate, in ABBA
order: quiet, and flooded (FLOOD idle connections opened and held, as a hostile local user
would). Per window: the job's mean step time from its own clock, the monitor's CPU, and
whether a scrape made during the window was answered. Prints flooded/quiet per pair.

    python -m benchmarks.overhead.exporter_flood --pairs 6 --seconds 4
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "benchmarks" / "scenarios" / "input_all_cores_busy.py"
FLOOD = 2000


def mean_step_ms(times: Path, since: float, until: float) -> float | None:
    data = times.read_bytes()
    ends = [t for t in struct.unpack(f"{len(data) // 8}d", data[: len(data) // 8 * 8])]
    inside = [t for t in ends if since <= t <= until]
    if len(inside) < 3:
        return None
    return (inside[-1] - inside[0]) / (len(inside) - 1) * 1000.0


def scraped(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return b"gputop_train_" in response.read()
    except OSError:
        return False


def window(
    times: Path, monitor: psutil.Process, url: str, seconds: float, flood: bool
) -> tuple[float | None, float, bool]:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    attackers = []
    if flood:
        for _ in range(FLOOD):
            attacker = socket.socket()
            attacker.setblocking(False)
            attacker.connect_ex(("127.0.0.1", port))
            attackers.append(attacker)
    cpu = monitor.cpu_times()
    start = time.perf_counter()
    time.sleep(seconds / 2)
    answered = scraped(url)
    time.sleep(max(0.0, seconds - (time.perf_counter() - start)))
    end = time.perf_counter()
    after = monitor.cpu_times()
    for attacker in attackers:
        attacker.close()
    used = (after.user + after.system - cpu.user - cpu.system) / (end - start) * 100
    return mean_step_ms(times, start, end), used, answered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    args = parser.parse_args()
    times = Path(tempfile.mkdtemp()) / "steps"
    times.touch()
    env = {**os.environ, "SCENARIO_STEP_TIMES": str(times), "PYTHONUNBUFFERED": "1"}
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", "--no-record", "--interval", "60",
         "--prometheus", "127.0.0.1:0", str(SCENARIO)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert monitor.stderr is not None
    url = None
    for line in monitor.stderr:
        found = re.search(r"Prometheus metrics at (\S+)", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        print("the monitor never served its endpoint")
        return 1
    # The monitor echoes the job's output on stderr: keep reading it, or it blocks there.
    threading.Thread(target=lambda: [None for _ in monitor.stderr], daemon=True).start()
    rows = []
    try:
        time.sleep(args.warmup)
        process = psutil.Process(monitor.pid)
        for pair in range(args.pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            results = {flood: window(times, process, url, args.seconds, flood) for flood in order}
            rows.append((results[False], results[True]))
    finally:
        os.killpg(monitor.pid, signal.SIGINT)  # Ctrl+C: the monitor stops the job it started
        try:
            monitor.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(monitor.pid, signal.SIGKILL)
    print(f"{'pair':>4} {'quiet ms':>9} {'flooded ms':>10} {'ratio':>6} "
          f"{'monitor CPU % quiet/flooded':>28} {'scrape answered':>16}")  # fmt: skip
    ratios = []
    for index, ((quiet, cpu_q, ok_q), (flooded, cpu_f, ok_f)) in enumerate(rows, 1):
        ratio = flooded / quiet if quiet and flooded else float("nan")
        ratios.append(ratio)
        print(f"{index:>4} {quiet or 0:>9.1f} {flooded or 0:>10.1f} {ratio:>6.3f} "
              f"{cpu_q:>13.1f} / {cpu_f:<12.1f} {f'{ok_q}/{ok_f}':>16}")  # fmt: skip
    good = [r for r in ratios if r == r]
    if good:
        print(f"flooded/quiet step time: median {statistics.median(good):.3f}, "
              f"range {min(good):.3f}-{max(good):.3f} over {len(good)} pairs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
