"""What the monitor costs: CPU of the gputop-train process and bytes it writes to the terminal.

Runs ``gputop-train [--headless] demos/resnet.py ARGS`` in a pseudo-terminal of the given size
(TUI first, then headless, in one run), lets it warm up, then measures over a fixed window:

- CPU: user+system time of the monitor process (samplers + UI, not the job), % of one core,
  split into the main thread (UI or headless printer) and the others (samplers, hook client);
- terminal output: bytes read from the pty master per second (what an SSH link would carry).

    python -m benchmarks.frontends.tui_cost --size 160x48 --warmup 30 --measure 60 -- --workers 8

With --screenshot DIR the TUI run presses S (save SVG) at the end; the file lands in DIR.
With --threads each run also reports the CPU of each of the monitor's threads, by name, and
with --breakdown the terminal bytes by kind (style codes, cursor moves, braille, the rest).
(``--profile DIR``, py-spy over the measured window, went in issue 47; its figures are history,
docs/benchmarks-history.md: ``git show 045b02a:benchmarks/frontends/tui_cost.py``.)

``--modes replay`` plays a recording of a real run (default: the H100 ladder in docs/examples)
in the TUI's replay mode: the same panels fed the same figures, on any machine, for the
terminal bytes (the CPU then is the replay's, not the live monitor's).

``--modes tui,nvitop`` runs nvitop (``pip install -e '.[bench]'``) at the same refresh in the
same pseudo-terminal size, beside the same demo started without gputop-train, alternating
with the TUI round after round, and prints the TUI's CPU and bytes over nvitop's: the
comparison of issue "cost" (TUI ≤ 1.5x nvitop's CPU). nvitop needs NVML: a GPU box only.

``--fake-node`` puts ``benchmarks/frontends/fake_node`` first on every process's PYTHONPATH:
its ``pynvml`` is a node of 8 busy GPUs on the fake NVML, which gputop-train and nvitop both
read, so ``--modes tui,nvitop`` runs on a box with no GPU (the job's figures come from its
CPU steps; nvitop shows the 8 GPUs and no process on them).

``--baseline DIR`` runs each mode but nvitop from an earlier tree too (``git archive REV | tar
-x -C DIR``), right after this tree's run, round after round, labelled ``MODE@baseline``, and
prints this tree's figures over the baseline's: a change's effect side by side in one run.
Every other round runs its runs in the reverse order (ABBA).

    python -m benchmarks.frontends.tui_cost --modes replay --breakdown --rounds 3 \
        --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]


def main_thread_cpu(process: psutil.Process) -> float:
    """CPU seconds of the process's main thread (its thread id is the process id)."""
    for thread in process.threads():
        if thread.id == process.pid:
            return thread.user_time + thread.system_time
    return 0.0


_KINDS = {
    "style codes": re.compile(rb"\x1b\[[0-9;]*m"),
    "cursor moves": re.compile(rb"\x1b\[\d+;\d+H"),
    "braille": re.compile(rb"\xe2[\xa0-\xa3][\x80-\xbf]"),  # U+2800-U+28FF in UTF-8
}


def bytes_by_kind(output: bytes, elapsed: float) -> dict[str, float]:
    """What the terminal was sent, per second: style codes, cursor moves, braille cells and
    the rest (text, line ends, other sequences)."""
    found = {kind: sum(map(len, pattern.findall(output))) for kind, pattern in _KINDS.items()}
    found["other"] = len(output) - sum(found.values())
    return {kind: round(count / elapsed, 1) for kind, count in found.items()}


def thread_ticks(pid: int) -> dict[int, tuple[str, int, int]]:
    """Each thread's name, CPU clock ticks (user + system) and times scheduled onto a CPU (its
    wake-ups; /proc/.../schedstat, 0 where the kernel keeps none), from /proc."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rpartition(")")[2].split()
            sched = (
                (task / "schedstat").read_text().split() if (task / "schedstat").exists() else []
            )
            slices = int(sched[2]) if len(sched) > 2 else 0
            found[int(task.name)] = (name, int(fields[11]) + int(fields[12]), slices)
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended
    return found


def thread_cpu(
    pid: int, before: dict[int, tuple[str, int, int]], elapsed: float
) -> tuple[dict[str, float], dict[str, float]]:
    """% of one core and wake-ups a second per thread name over the window (threads of one
    name summed). A wake-up runs on cold caches and costs CPU of its own (docs/benchmarks.md
    §5): a thread's wake-ups explain much of its CPU."""
    hertz = os.sysconf("SC_CLK_TCK")
    totals: dict[str, float] = {}
    wakes: dict[str, float] = {}
    for tid, (name, ticks, slices) in thread_ticks(pid).items():
        _, ticks_before, slices_before = before.get(tid, (name, 0, 0))
        totals[name] = totals.get(name, 0.0) + 100.0 * (ticks - ticks_before) / hertz / elapsed
        wakes[name] = wakes.get(name, 0.0) + (slices - slices_before) / elapsed
    order = sorted(totals, key=lambda name: -totals[name])
    return (
        {name: round(totals[name], 2) for name in order},
        {name: round(wakes[name], 1) for name in order},
    )


def named_threads(tree: Path) -> Path:
    """The thread-naming launcher of ``tree``: benchmarks/overhead/ since the lab was sorted
    by topic, benchmarks/ in a baseline tree from before."""
    moved = tree / "benchmarks" / "overhead" / "named_threads.py"
    return moved if moved.exists() else tree / "benchmarks" / "named_threads.py"


def run_in_pty(
    args: list[str],
    columns: int,
    rows: int,
    warmup_s: float,
    measure_s: float,
    screenshot_dir: Path | None,
    program: list[str] | None = None,
    keys: bytes = b"",
    by_thread: bool = False,
    breakdown: bool = False,
    tree: Path = REPO,
) -> dict[str, Any]:
    """Measure ``gputop-train ARGS`` (or ``program``, another monitor) in a pty, the package
    of ``tree``; ``keys`` are typed 3 s after the start (a replay's seek)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows)}
    if screenshot_dir is not None:
        env["XDG_DATA_HOME"] = str(screenshot_dir)
    if tree != REPO:  # the earlier tree's package, not this one's
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    launcher = [str(named_threads(tree))] if by_thread else ["-m", "gputop_train"]
    monitor = subprocess.Popen(
        program or [sys.executable, *launcher, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tree,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    process = psutil.Process(monitor.pid)

    def pump(seconds: float, keep: list[bytes] | None = None) -> int:
        total, deadline = 0, time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([master], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                total += len(data)
                if keep is not None:
                    keep.append(data)
        return total

    if keys:
        pump(3.0)
        os.write(master, keys)
    pump(warmup_s)
    cpu_before, main_before = sum(process.cpu_times()[:2]), main_thread_cpu(process)
    threads_before = thread_ticks(monitor.pid) if by_thread else {}
    started = time.monotonic()
    kept: list[bytes] | None = [] if breakdown else None
    written = pump(measure_s, kept)
    elapsed = time.monotonic() - started
    cpu_pct = 100.0 * (sum(process.cpu_times()[:2]) - cpu_before) / elapsed
    main_pct = 100.0 * (main_thread_cpu(process) - main_before) / elapsed
    if screenshot_dir is not None:
        os.write(master, b"S")
        pump(3)
    threads, wakes = (
        thread_cpu(monitor.pid, threads_before, elapsed) if threads_before else ({}, {})
    )
    if program is not None:
        os.write(master, b"q")  # nvitop quits on q
    elif "--headless" in args:
        os.killpg(monitor.pid, 2)  # our Ctrl+C: forwarded to the job
    else:
        os.write(master, b"q")
        pump(1)
        os.write(master, b"s")  # stop the job
    try:
        pump(20)
        monitor.wait(timeout=30)
    finally:
        if monitor.poll() is None:
            monitor.kill()
        os.close(master)
    return {
        "cpu_pct_of_one_core": round(cpu_pct, 2),
        # The main thread runs the UI (or the headless printer); the others sample and read.
        "main_thread_cpu_pct": round(main_pct, 2),
        "other_threads_cpu_pct": round(cpu_pct - main_pct, 2),
        "terminal_bytes_per_s": round(written / elapsed, 1),
        "measured_s": round(elapsed, 1),
        **({"threads_cpu_pct": threads, "threads_wakeups_per_s": wakes} if threads else {}),
        **({"bytes_per_s_by_kind": bytes_by_kind(b"".join(kept), elapsed)} if kept else {}),
    }


def run_nvitop(
    demo: list[str], columns: int, rows: int, warmup_s: float, measure_s: float, refresh: float
) -> dict[str, float]:
    """nvitop in the same pty size, beside the same demo (started plain: no hook)."""
    job = subprocess.Popen(
        [sys.executable, *demo],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        program = [sys.executable, "-m", "nvitop", "--interval", str(refresh)]
        return run_in_pty([], columns, rows, warmup_s, measure_s, None, program=program)
    finally:
        os.killpg(job.pid, 9)
        job.wait()


def run_mode(
    args: argparse.Namespace,
    mode: str,
    demo: list[str],
    columns: int,
    rows: int,
    tree: Path,
) -> dict[str, Any]:
    """One measured run of ``mode`` (tui, headless, replay or nvitop) from ``tree``."""
    if mode == "nvitop":
        return run_nvitop(demo, columns, rows, args.warmup, args.measure, args.refresh)
    if mode == "replay":  # no GPU needed: a recorded H100 run drives the same panels
        seek = b"\x1b[C" * int(args.seek // 10)
        return run_in_pty(
            ["replay", str(args.recording.resolve())],
            columns,
            rows,
            args.warmup,
            args.measure,
            None,
            keys=seek,
            by_thread=args.threads,
            breakdown=args.breakdown,
            tree=tree,
        )
    extra = ["--headless"] if mode == "headless" else ["--refresh", str(args.refresh)]
    return run_in_pty(
        [*extra, *demo],
        columns,
        rows,
        args.warmup,
        args.measure,
        args.screenshot if mode == "tui" else None,
        by_thread=args.threads,
        breakdown=args.breakdown,
        tree=tree,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--measure", type=float, default=60.0)
    parser.add_argument("--screenshot", type=Path, help="save the TUI's SVG screenshot here")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--modes", default="tui,headless", help="which to run, in order")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the modes this many times, alternating"
    )
    parser.add_argument(
        "--script",
        default="demos/resnet.py",
        help="the training script (a GPU-less box can use tests/scenarios/loops.py sleepy ...)",
    )
    parser.add_argument("--refresh", type=float, default=0.5, help="TUI and nvitop refresh, s")
    parser.add_argument(
        "--recording",
        type=Path,
        default=REPO / "docs" / "examples" / "h100-ladder.jsonl",
        help="for --modes replay: the recording played (1x) in the TUI",
    )
    parser.add_argument("--seek", type=float, default=80.0, help="replay: start this far in, s")
    parser.add_argument(
        "--threads", action="store_true", help="also each monitor thread's CPU (named_threads.py)"
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="also the terminal bytes by kind (codes, text)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="an earlier tree: each mode but nvitop runs from it too"
    )
    parser.add_argument(
        "--fake-node", action="store_true", help="8 fake GPUs for every process (no GPU needed)"
    )
    parser.add_argument("demo_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.fake_node:  # inherited by the monitor, nvitop and the job alike
        path = [str(REPO / "benchmarks" / "frontends" / "fake_node"), os.environ.get("PYTHONPATH")]
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    columns, rows = (int(v) for v in args.size.split("x"))
    demo = [args.script, *[a for a in args.demo_args if a != "--"]]
    runs: dict[str, list[dict[str, float]]] = {}
    trees = [("", REPO)] + ([("@baseline", args.baseline.resolve())] if args.baseline else [])
    plan = [
        (mode + suffix, mode, tree)
        for mode in args.modes.split(",")
        for suffix, tree in (trees if mode != "nvitop" else trees[:1])
    ]
    for round_index in range(args.rounds):
        # ABBA: every other round runs in the reverse order, so no run always comes first
        # (on a shared box the load drifts within a round).
        for label, mode, tree in plan if round_index % 2 == 0 else plan[::-1]:
            run = run_mode(args, mode, demo, columns, rows, tree)
            runs.setdefault(label, []).append(run)
            print(label, json.dumps(run), flush=True)
    # One figure per mode: the median run by CPU (the machines are noisy; every run is kept).
    results = {
        mode: sorted(found, key=lambda r: r["cpu_pct_of_one_core"])[len(found) // 2]
        for mode, found in runs.items()
    }
    for mode, result in results.items():
        print(f"{mode} median of {len(runs[mode])}", json.dumps(result), flush=True)
    if "tui" in runs and "nvitop" in runs:  # per round, side by side: the ratio is what holds
        for key in ("cpu_pct_of_one_core", "terminal_bytes_per_s"):
            ratios = [
                tui[key] / max(nv[key], 1e-9)
                for tui, nv in zip(runs["tui"], runs["nvitop"], strict=False)
            ]
            shown = ", ".join(f"{r:.2f}" for r in ratios)
            print(f"tui / nvitop {key}: median {sorted(ratios)[len(ratios) // 2]:.2f} ({shown})")
    for label in [label for label in runs if label.endswith("@baseline")]:
        mode = label.removesuffix("@baseline")
        for key in ("cpu_pct_of_one_core", "main_thread_cpu_pct", "terminal_bytes_per_s"):
            ratios = [
                new[key] / max(old[key], 1e-9)
                for new, old in zip(runs[mode], runs[label], strict=False)
            ]
            shown = ", ".join(f"{r:.2f}" for r in ratios)
            print(
                f"{mode} / baseline {key}: median {sorted(ratios)[len(ratios) // 2]:.2f} ({shown})"
            )
    if args.screenshot:
        for svg in args.screenshot.rglob("*.screenshot-*.svg"):  # the S key's file, not a chart
            shutil.copy(svg, args.screenshot / "tui.svg")
            break
    if args.json:
        report = {"size": args.size, "demo": demo, **results, "runs": runs}
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
