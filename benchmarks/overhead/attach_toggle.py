"""The monitor's cost to a CPU-saturated job, resolved inside one run (issue: cost).

overhead/saturated_cost.py compares separate runs, and on the H200 VM one arm's runs spread
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

With ``--pause`` the monitor attaches once and stays attached; the windows alternate between
it running and it stopped (SIGSTOP to its process group, SIGCONT to go on). Nothing starts or
exits between windows, so they can be short (2 s) and many: where the job's pace drifts
slowly, short windows side by side cancel the drift that long ones keep (where its steps come
in waves, they do not: ``pace_noise.py`` tells which from the ``--json`` file). A stopped monitor
reads nothing; the hook still frames and sends its steps into the socket's buffer, so this
compares the monitor's own cost (samplers, hook client, reading the socket) and leaves the
hook's side in both arms. On SIGCONT the monitor reads what waited in the buffer inside the
window that follows, so a monitored window also carries the reading of the stopped one
before it: a bias against the monitor, never for it.

    python -m benchmarks.overhead.attach_toggle --pairs 12 --window 20 --settle 4
    python -m benchmarks.overhead.attach_toggle --pause --pairs 120 --window 2 --settle 0 \
        --json a.json
    python -m benchmarks.overhead.attach_toggle --report a.json b.json  # both runs' pairs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
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

from benchmarks.common.paths import REPO, SATURATED_SCENARIO
from benchmarks.common.steps import bootstrap_median_interval, mean_step_ms, step_ends
from benchmarks.common.threads import schedstat, thread_names
from gputop_train import wire
from gputop_train.job.launched import hook_environment

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


def attach(pid: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gputop_train", "attach", str(pid), "--headless"]
    command += ["--no-record", "--format", "json"]
    return subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, for --pause's SIGSTOP
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


def monitor_seconds(pid: int) -> float:
    """CPU seconds of the monitor's live threads so far (schedstat: a 2 s window of a monitor
    that uses 1% of a core is 20 ms, two of psutil's ticks)."""
    return sum(run_ns for run_ns, _ in schedstat(pid).values()) / 1e9


def print_accounting(windows: list[Window], hook_found: bool) -> None:
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
    if hook_found:
        print(
            f"the hook's thread in the job: {statistics.median(hook_on):.3f}% of a core with "
            f"the monitor attached, {statistics.median(hook_off):.3f}% without"
        )
    else:
        print("the hook's thread was not found (py-spy dump): its CPU is not counted")


def stop(monitor: subprocess.Popen[bytes], stopped: bool) -> None:
    """SIGSTOP or SIGCONT the monitor's process group (its own session: nothing else in it)."""
    os.killpg(monitor.pid, signal.SIGSTOP if stopped else signal.SIGCONT)


def run_windows(
    job: subprocess.Popen[bytes], base: dict[str, str], args: argparse.Namespace, hook: set[int]
) -> list[Window]:
    """Alternate the monitored and unmonitored windows in ABBA order, accounting each."""
    windows: list[Window] = []
    kept = attach(job.pid, base) if args.pause else None
    try:
        if kept is not None:
            time.sleep(args.warmup / 2)  # the monitor's start is not its steady cost
        for pair in range(args.pairs):
            order = ("on", "off") if pair % 2 == 0 else ("off", "on")
            for state in order:
                start = time.perf_counter()
                monitor: subprocess.Popen[bytes] | None = kept
                if kept is not None:
                    stop(kept, state == "off")
                elif state == "on":
                    monitor = attach(job.pid, base)
                time.sleep(args.settle)
                job_before = cpu_seconds(job.pid, children=True)
                hook_before = thread_seconds(job.pid, hook)
                monitor_before = monitor_seconds(monitor.pid) if monitor else 0.0
                time.sleep(args.window - args.settle)
                end = time.perf_counter()
                monitor_cpu = monitor_seconds(monitor.pid) - monitor_before if monitor else 0.0
                job_cpu = cpu_seconds(job.pid, children=True) - job_before
                hook_cpu = thread_seconds(job.pid, hook) - hook_before
                if monitor is not None and kept is None:
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
        if kept is not None:
            with contextlib.suppress(ProcessLookupError):
                stop(kept, False)
            detach(kept)
    return windows


def pair_ratios(windows: list[Window]) -> list[float]:
    """Monitored over unmonitored mean step time, per pair that has both."""
    steps = {(w.pair, w.monitored): w.mean_step_ms for w in windows}
    ratios = []
    for pair in sorted({w.pair for w in windows}):
        on, off = steps.get((pair, True)), steps.get((pair, False))
        if on and off:
            ratios.append(on / off)
    return ratios


def print_ratios(ratios: list[float]) -> None:
    """The pairs' median with a bootstrap interval, and the mean of their log ratios with a
    normal interval (the tighter of the two once pairs are many)."""
    low, high = bootstrap_median_interval(ratios)
    spread = statistics.pstdev(ratios) if len(ratios) > 1 else 0.0
    print(
        f"monitored / unmonitored step time: median {statistics.median(ratios):.4f} over "
        f"{len(ratios)} pairs, 95% CI of the median {low:.4f}-{high:.4f}, range "
        f"{min(ratios):.4f}-{max(ratios):.4f}, sd {spread:.4f}"
    )
    if len(ratios) > 2:
        logs = [math.log(r) for r in ratios]
        mean, error = statistics.fmean(logs), 1.96 * statistics.stdev(logs) / math.sqrt(len(logs))
        print(
            f"geometric mean {math.exp(mean):.4f}, 95% CI {math.exp(mean - error):.4f}-"
            f"{math.exp(mean + error):.4f}"
        )


def report(files: list[Path]) -> None:
    """Pool the pairs of several runs' ``--json`` files: each pair is its own control, so
    pairs from separate runs of one setup add up."""
    ratios: list[float] = []
    windows: list[Window] = []
    for path in files:
        run = [Window(**row) for row in json.loads(path.read_text())["windows"]]
        ratios += pair_ratios(run)
        windows += run
    print_ratios(ratios)
    print_accounting(windows, any(w.hook_thread_cpu_s > 0 for w in windows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12, help="monitored/unmonitored pairs")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per window")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds left out per window")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds before the first")
    parser.add_argument(
        "--pause", action="store_true", help="attach once; stop and continue the monitor"
    )
    parser.add_argument("--json", type=Path, help="write every window (and step end) here")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="run nothing: pool these runs' --json files"
    )
    parser.add_argument("script", nargs="*", help="the scenario and its flags")
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    script = args.script or [str(SATURATED_SCENARIO)]
    total_s = args.warmup + 2 * args.pairs * args.window + 60
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
            windows = run_windows(job, base, args, hook)
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
    print_ratios(pair_ratios(windows))
    print_accounting(windows, bool(hook))
    if args.json:
        rows = [asdict(window) for window in windows]
        kept_ends = [round(end, 5) for end in ends]  # 10 us: pace_noise.py's windows are 1 s+
        record = {"script": script, "argv": sys.argv[1:], "windows": rows, "step_ends": kept_ends}
        args.json.write_text(json.dumps(record, separators=(",", ":")))


if __name__ == "__main__":
    main()
