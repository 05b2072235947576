"""The hook's cost on a DDP job with its collectives timed, side by side with another tree.

Runs 2 gloo ranks of tests/scenarios/collectives.py ``ddp`` (short steps: a small model and
no sleep) three ways, round after round in rotated order: without the hook (plain torchrun),
under the monitor of ``--tree`` (a ``git archive`` of the commit before, whose hook does not
time collectives), and under this tree's monitor. Each rank's own loop clock gives its step
times; the report is the median step of each arm and the ratios, and each arm's per-round
medians (their spread is the noise of the box).

    git archive a903fe9 --prefix=prev/ | tar -x -C /tmp
    python -m benchmarks.overhead.collective_overhead --tree /tmp/prev --rounds 4 --steps 400
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common.steps import rank_step_ms

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "tests" / "scenarios" / "collectives.py"
WARMUP = 20  # steps each rank skips: process-group set-up, first allocations


def run_arm(tree: Path | None, steps: int, width: int) -> list[float]:
    """Every rank's step times (ms, after the warm-up) of one job; ``tree`` None: no hook."""
    with tempfile.TemporaryDirectory(prefix="gputop-train-overhead-") as truth:
        job = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", str(SCENARIO), "ddp", f"steps={steps}",
            f"width={width}", "step_ms=0", f"truth_dir={truth}",
        ]  # fmt: skip
        env = dict(os.environ)
        if tree is None:
            command = job
        else:
            env["PYTHONPATH"] = str(tree)
            command = [sys.executable, "-m", "gputop_train", "--headless", "--no-record",
                       "--interval", "2", "--", *job]  # fmt: skip
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=600, env=env, cwd=tree or REPO
        )
        if result.returncode != 0:
            raise SystemExit(f"{tree or 'bare'}: exit {result.returncode}\n{result.stderr[-2000:]}")
        return rank_step_ms(truth, WARMUP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--json", type=Path, help="write the per-round figures here")
    args = parser.parse_args()
    arms: dict[str, Path | None] = {"bare": None, "prev": args.tree.resolve(), "this": REPO}
    names = list(arms)
    rounds: dict[str, list[float]] = {name: [] for name in arms}
    pooled: dict[str, list[float]] = {name: [] for name in arms}
    for index in range(args.rounds):
        order = names[index % 3 :] + names[: index % 3]  # rotated: no arm always first
        for name in order:
            times = run_arm(arms[name], args.steps, args.width)
            rounds[name].append(statistics.median(times))
            pooled[name] += times
    medians = {name: statistics.median(times) for name, times in pooled.items()}
    print("| arm | median step, ms | per-round medians, ms | vs bare | vs prev |")
    print("|---|---:|---|---:|---:|")
    for name in names:
        per_round = ", ".join(f"{m:.3f}" for m in rounds[name])
        print(
            f"| {name} | {medians[name]:.3f} | {per_round} "
            f"| {medians[name] / medians['bare']:.3f} | {medians[name] / medians['prev']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
