"""The Prometheus exporter's CPU cost: what one scrape costs the monitor's process, and that
cost as a share of one core at a scrape interval (issue: cluster, "at most 0.5% of one core at
15 s"); and, since the page is rendered once a second whether scraped or not (export/page.py,
issue 45), the render's own share of a core (the idle stretches' CPU).

A child process holds a session as busy as a large node's (8 ranks at 20 steps/s, 8 GPUs at
10 Hz, 10 minutes of history) and serves it; the parent reads the child's CPU time over an
idle stretch and over back-to-back scrapes of the same length, side by side, round after round.

    python -m benchmarks.overhead.exporter_cost --rounds 5 --scrapes 40
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import urllib.request

import psutil

from gputop_train import events

RANKS, GPUS, STEPS_PER_S, GPU_HZ, HISTORY_S = 8, 8, 20, 10, 600


def serve() -> None:
    """Child: a full session behind the exporter; prints its URL, then waits."""
    from gputop_train.export.identity import JobIdentity
    from gputop_train.export.prometheus import serve as serve_metrics
    from gputop_train.samples import GpuSample
    from gputop_train.session.model import Session
    from gputop_train.views import view_of

    now = time.time()
    session = Session(command=("torchrun", "train.py"), started_at=now - HISTORY_S)
    for rank in range(RANKS):
        pid = 1000 + rank
        session.apply(
            events.ProcessHello.of(pid, {"rank": rank, "local_rank": rank, "host": "node"})
        )
        rows = []
        for i in range(1, HISTORY_S * STEPS_PER_S + 1):
            t = now - HISTORY_S + i / STEPS_PER_S
            rows.append([i, t, 50.0, 2.0 + rank, 256, 1, 45.0, 2**33, 2**34, 2**35])
        session.apply(events.StepRows(pid, rows))
    for tick in range(HISTORY_S * GPU_HZ):
        t = now - HISTORY_S + tick / GPU_HZ
        session.apply(
            events.GpuSampled(
                tuple(
                    GpuSample(
                        index,
                        t,
                        "NVIDIA H100",
                        97.0,
                        40.0,
                        2**35,
                        2**36,
                        650.0,
                        sm_active_pct=80.0,
                        tensor_active_pct=30.0,
                    )
                    for index in range(GPUS)
                )
            )
        )
    who = JobIdentity("train", "0", "node")
    exporter = serve_metrics("127.0.0.1:0", lambda: view_of(session.snapshot()), who)
    print(exporter.url, flush=True)
    time.sleep(3600)


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval, s")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = child.stdout.readline().strip()  # type: ignore[union-attr]
        process = psutil.Process(child.pid)
        per_scrape, idle_share, body = [], [], b""
        for _ in range(args.rounds):
            start, began = cpu_s(process), time.perf_counter()
            for _ in range(args.scrapes):
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read()
            busy_s, wall_s = cpu_s(process) - start, time.perf_counter() - began
            start = cpu_s(process)
            time.sleep(wall_s)  # the same length idle: what the process costs anyway
            idle_s = cpu_s(process) - start
            per_scrape.append((busy_s - idle_s) / args.scrapes)
            idle_share.append(idle_s / wall_s)
    finally:
        child.kill()
    median = statistics.median(per_scrape)
    print(f"session: {RANKS} ranks, {GPUS} GPUs, {HISTORY_S} s of history; {len(body)} B/scrape")
    print(
        f"CPU per scrape: median {median * 1000:.2f} ms "
        f"(rounds: {', '.join(f'{s * 1000:.2f}' for s in per_scrape)} ms)"
    )
    print(f"at one scrape per {args.interval:g} s: {100 * median / args.interval:.3f}% of one core")
    render = statistics.median(idle_share)
    print(f"unscraped (the page rendered once a second): {100 * render:.2f}% of one core")


if __name__ == "__main__":
    main()
