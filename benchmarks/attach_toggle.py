"""The monitor's cost to a CPU-saturated job, resolved inside one run (issue: cost).

benchmarks/saturated_cost.py compares separate runs, and on the H200 VM one arm's runs spread
from 70 to 111 ms: no number of rounds that fits in a device call resolves 1% that way. Here
one job runs under the hook for the whole benchmark, and a headless monitor attaches to it
and detaches again, window after window (``gputop-train attach PID --headless``), so that
what differs between the windows is only whether the monitor runs: its samplers, its hook
client and the socket traffic, and the hook's work for a connected monitor (framing and
sending its steps). The windows alternate in ABBA order (on off, off on, ...) so that a
steady drift of the machine cancels; the first ``--settle`` seconds after each attach and
each detach are left out (the monitor's start and exit, its import included, are a one-off,
not the steady cost).

Each window's figure is its mean step time from the job's own clock
(``SCENARIO_STEP_TIMES``); each pair gives monitored / unmonitored, and the report is the
median of the pairs' ratios with a bootstrap 95% interval. What it cannot see: the hook's
per-step work with no monitor attached (that arm is the baseline here; saturated_cost.py's
``hook`` arm and docs/benchmarks.md §4 measure it against a plain run).

Where the job's own pace moves more than the effect between windows, it also accounts for
the CPU, window by window: the monitor's CPU seconds, the hook thread's in the job (from
``/proc/PID/task/TID/schedstat``, the thread named by py-spy), and all the CPU the job and its
workers used. On a saturated box the job can lose at most what the monitor and the hook's
thread took, so their share of the window's CPU bounds the monitor's cost to the job.

    python benchmarks/attach_toggle.py --pairs 12 --window 20 --settle 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from saturated_cost import SCENARIO, bootstrap_median_interval, step_ends  # noqa: E402
from thread_costs import schedstat, thread_names  # noqa: E402

from gputop_train import wire  # noqa: E402
from gputop_train.job.launched import hook_environment  # noqa: E402

HOOK_THREAD = "gputop-train-hook"  # hook/listener.py's thread


@dataclass
class Window:
    """One measured window: its span on the job's clock (after the settling) and its CPU."""

    pair: int
    monitored: bool
    start: float
    end: float
    monitor_cpu_s: float
    hook_thread_cpu_s: float
    job_cpu_s: float
    mean_step_ms: float | None = None


def mean_step_ms(ends: list[float], start: float, end: float) -> float | None:
    """Mean step time of the steps that ended in [start, end), or None with too few."""
    inside = [t for t in ends if start <= t < end]
    if len(inside) < 5:
        return None
    return (inside[-1] - inside[0]) / (len(inside) - 1) * 1000.0


def attach(pid: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gputop_train", "attach", str(pid), "--headless"]
    command += ["--no-record", "--format", "json"]
    return subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def detach(monitor: subprocess.Popen[bytes]) -> None:
    """Ctrl+C: an attached monitor detaches and leaves the job running (docs/exits.md)."""
    monitor.send_signal(signal.SIGINT)
    try:
        _, errors = monitor.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        monitor.kill()
        raise RuntimeError("the monitor did not detach within 30 s") from None
    if monitor.returncode != 0:
        raise RuntimeError(f"the monitor exited {monitor.returncode}: {errors.decode()[-500:]}")


def cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU seconds of ``pid`` so far (with its live children: a job's DataLoader workers)."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        for member in [process, *(process.children(recursive=True) if children else [])]:
            with contextlib.suppress(psutil.Error):
                times = member.cpu_times()
                total += times.user + times.system
    return total


def thread_seconds(pid: int, tids: set[int]) -> float:
    """CPU seconds of these threads of ``pid`` so far (schedstat: exact, not 10 ms ticks)."""
    return sum(run_ns for tid, (run_ns, _) in schedstat(pid).items() if tid in tids) / 1e9


def print_accounting(windows: list[Window], hook: set[int]) -> None:
    """The monitor's and the hook thread's share of all the CPU of each monitored window."""
    shares, hook_on, hook_off = [], [], []
    for window in windows:
        hook_pct = 100.0 * window.hook_thread_cpu_s / (window.end - window.start)
        if window.monitored:
            taken = window.monitor_cpu_s + window.hook_thread_cpu_s
            shares.append(100.0 * taken / (window.monitor_cpu_s + window.job_cpu_s))
            hook_on.append(hook_pct)
        else:
            hook_off.append(hook_pct)
    print(
        f"monitor + hook thread, share of all the CPU of a monitored window: median "
        f"{statistics.median(shares):.3f}%, highest {max(shares):.3f}% ({len(shares)} windows)"
    )
    if hook:
        print(
            f"the hook's thread in the job: {statistics.median(hook_on):.3f}% of a core with "
            f"the monitor attached, {statistics.median(hook_off):.3f}% without"
        )
    else:
        print("the hook's thread was not found (py-spy dump): its CPU is not counted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12, help="monitored/unmonitored pairs")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per window")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds left out per window")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds before the first")
    parser.add_argument("--json", type=Path, help="write every window here")
    parser.add_argument("script", nargs="*", help="the scenario and its flags")
    args = parser.parse_args()
    script = args.script or [str(SCENARIO)]
    total_s = args.warmup + 2 * args.pairs * args.window + 60
    windows: list[Window] = []
    with tempfile.TemporaryDirectory() as scratch:
        base = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_TRAIN_")}
        base[wire.RUNTIME_DIR_ENV] = str(Path(scratch) / "run")
        times = Path(scratch) / "steps.bin"
        job_env = hook_environment({**base, "SCENARIO_STEP_TIMES": str(times)})
        job = subprocess.Popen(
            [sys.executable, *script, "--seconds", str(total_s)],
            env=job_env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(args.warmup)
            hook = {tid for tid, name in thread_names(job.pid).items() if name == HOOK_THREAD}
            for pair in range(args.pairs):
                order = ("on", "off") if pair % 2 == 0 else ("off", "on")
                for state in order:
                    start = time.perf_counter()
                    monitor = attach(job.pid, base) if state == "on" else None
                    time.sleep(args.settle)
                    job_before = cpu_seconds(job.pid, children=True)
                    hook_before = thread_seconds(job.pid, hook)
                    monitor_before = cpu_seconds(monitor.pid) if monitor else 0.0
                    time.sleep(args.window - args.settle)
                    end = time.perf_counter()
                    monitor_cpu = cpu_seconds(monitor.pid) - monitor_before if monitor else 0.0
                    job_cpu = cpu_seconds(job.pid, children=True) - job_before
                    hook_cpu = thread_seconds(job.pid, hook) - hook_before
                    if monitor is not None:
                        detach(monitor)
                    if job.poll() is not None:
                        raise RuntimeError(f"the job ended early (exit {job.returncode})")
                    windows.append(
                        Window(
                            pair + 1,
                            state == "on",
                            start + args.settle,
                            end,
                            round(monitor_cpu, 4),
                            round(hook_cpu, 4),
                            round(job_cpu, 2),
                        )
                    )
        finally:
            job.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.wait(timeout=30)
            if job.poll() is None:
                job.kill()
        ends = step_ends(times)
    for window in windows:
        window.mean_step_ms = mean_step_ms(ends, window.start, window.end)
        print(json.dumps(asdict(window)), flush=True)
    steps = {(w.pair, w.monitored): w.mean_step_ms for w in windows}
    ratios = []
    for pair in range(1, args.pairs + 1):
        on, off = steps[pair, True], steps[pair, False]
        if on and off:
            ratios.append(on / off)
    low, high = bootstrap_median_interval(ratios)
    spread = statistics.pstdev(ratios) if len(ratios) > 1 else 0.0
    print(
        f"monitored / unmonitored step time: median {statistics.median(ratios):.4f} over "
        f"{len(ratios)} pairs, 95% CI of the median {low:.4f}-{high:.4f}, range "
        f"{min(ratios):.4f}-{max(ratios):.4f}, sd {spread:.4f}"
    )
    print_accounting(windows, hook)
    if args.json:
        rows = [asdict(window) for window in windows]
        args.json.write_text(json.dumps({"script": script, "windows": rows}, indent=2))


if __name__ == "__main__":
    main()
