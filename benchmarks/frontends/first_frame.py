"""How soon the TUI paints on a busy box: seconds from the launch to its frame on screen and to
the job's first figures (issue 46: a blank screen for 10-14 s at load 7-8.5).

The whole TUI on ``tests/scenarios/loops.py steady`` in tmux (160x48), this tree against an
earlier one (``--baseline DIR``, a ``git archive REV | tar -x -C DIR``), launches alternated
ABBA, ``--hogs N`` busy loops beside (run it under ``heavy -x``; the load is printed).

    python -m benchmarks.frontends.first_frame --baseline /tmp/base --hogs 10 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIGURES = re.compile(r"steps/s +[0-9]")  # the Steps panel's first figure


def _screen(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
    ).stdout


def launch(tree: Path, limit_s: float = 120.0) -> tuple[float, float]:
    """Seconds from the launch to the frame ("1 Overview") and to the first figures."""
    session = f"first{os.getpid()}"
    job = "tests/scenarios/loops.py steady seconds=100"
    command = (
        f"cd {tree} && PYTHONPATH={tree} timeout --foreground 150 "
        f"{sys.executable} -m gputop_train --no-record {job}"
    )
    started = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command])
    frame = figures = float("inf")
    try:
        while (elapsed := time.monotonic() - started) < limit_s:
            screen = _screen(session)
            if frame == float("inf") and "1 Overview" in screen:
                frame = elapsed
            if FIGURES.search(screen):
                figures = elapsed
                break
            time.sleep(0.05)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"])
        time.sleep(1)
        subprocess.run(["tmux", "send-keys", "-t", session, "s"])
        time.sleep(5)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return frame, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="an earlier tree, launched beside this one")
    parser.add_argument("--rounds", type=int, default=3, help="ABBA rounds")
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside")
    args = parser.parse_args()
    trees = {"now": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    loop = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(args.hogs)]
    found: dict[str, list[tuple[float, float]]] = {arm: [] for arm in trees}
    try:
        time.sleep(20 if hogs else 0)  # the load settles
        for index in range(args.rounds):
            for arm in list(trees) if index % 2 == 0 else list(reversed(trees)):
                frame, figures = launch(trees[arm])
                found[arm].append((frame, figures))
                print(
                    f"{arm} frame {frame:.2f} s, figures {figures:.2f} s, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    for arm, runs in found.items():
        frames, firsts = [f for f, _ in runs], [g for _, g in runs]
        print(
            f"{arm:<8} frame median {statistics.median(frames):.2f} s (range {min(frames):.2f}-"
            f"{max(frames):.2f}), first figures median {statistics.median(firsts):.2f} s "
            f"(range {min(firsts):.2f}-{max(firsts):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
