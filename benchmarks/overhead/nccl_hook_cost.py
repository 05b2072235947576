"""The hook's cost on a real NCCL job: DDP at a ~20 ms step on the node's GPUs, plain and
monitored runs alternated (ABBA), paired by round, each job's own meter.

Each run is ``torchrun --nproc-per-node N tests/scenarios/collectives.py ddp device=cuda``:
per step a batch of 256 through two Linear layers of ``--width`` (a 64 MiB gradient
all-reduced over NCCL at 4096) around a GPU spin of ``--step-ms``; each rank writes its own
loop clock's step times (its meter). The monitored arm runs the same command under
``gputop-train --headless --no-record``. A round is one plain and one monitored run, in ABBA
order over the rounds (AB, BA, ...: benchmarks/common/abba.py) so that neither arm is always
first; its figure is the monitored
median step over the plain one. The cost is the median of the rounds' ratios, each round
shown (a burst of the machine moves a round, not the median).

    python -m benchmarks.overhead.nccl_hook_cost --rounds 4 --steps 600 --json out.json
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

from benchmarks.common.abba import abba_rounds, add_round_options
from benchmarks.common.provenance import write_result
from benchmarks.common.steps import rank_step_ms

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "tests" / "scenarios" / "collectives.py"
WARMUP = 50  # steps each rank skips: NCCL's first all-reduces, the allocator's first blocks


def run(monitored: bool, steps: int, width: int, step_ms: float, nproc: int) -> list[float]:
    """Every rank's step times (ms, after the warm-up) of one job."""
    with tempfile.TemporaryDirectory(prefix="gputop-train-nccl-cost-") as truth:
        job = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(nproc), str(SCENARIO), "ddp", "device=cuda",
            f"steps={steps}", f"width={width}", "batch=256", f"step_ms={step_ms}",
            f"truth_dir={truth}",
        ]  # fmt: skip
        monitor = [sys.executable, "-m", "gputop_train", "--headless", "--no-record",
                   "--interval", "5", "--"]  # fmt: skip
        command = [*monitor, *job] if monitored else job
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=600, env=dict(os.environ)
        )
        if result.returncode != 0:
            arm = "monitored" if monitored else "plain"
            raise SystemExit(f"{arm}: exit {result.returncode}\n{result.stderr[-3000:]}")
        return rank_step_ms(truth, WARMUP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_options(parser, rounds=4, warmup=None, measure=None)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--step-ms", type=float, default=18.0)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the per-round figures here")
    args = parser.parse_args()

    def measure(arm: str, index: int) -> float:
        started = time.monotonic()
        times = run(arm == "monitored", args.steps, args.width, args.step_ms, args.nproc)
        print(
            f"round {index + 1} {arm}: median step {statistics.median(times):.3f} ms over "
            f"{len(times)} rank-steps ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        return statistics.median(times)

    rounds = abba_rounds(("plain", "monitored"), args.rounds, measure)
    for medians in rounds:
        medians["ratio"] = medians["monitored"] / medians["plain"]
    ratios = [r["ratio"] for r in rounds]
    print("| round | plain median step, ms | monitored, ms | monitored / plain |")
    print("|---:|---:|---:|---:|")
    for index, r in enumerate(rounds, 1):
        print(f"| {index} | {r['plain']:.3f} | {r['monitored']:.3f} | {r['ratio']:.4f} |")
    cost = statistics.median(ratios) - 1.0
    print(f"cost: median of the rounds' ratios {statistics.median(ratios):.4f} ({cost:+.2%})")
    if args.json:
        write_result(args.json, json.dumps({"rounds": rounds, "cost": cost}, indent=1))


if __name__ == "__main__":
    main()
