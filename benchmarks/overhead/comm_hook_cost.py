"""What timing the collectives adds to a hooked DDP step, in one process, side by side.

One gloo process group of one rank, the hook installed; two identical DDP models of a few
layers (one gradient bucket a layer), one built with the collective timing on (its
first-parameter gradient hook) and one with it off, as the hook was before. Blocks of steps
alternate ABBA between them, the timing switched on and off with them, with an explicit
``dist.all_reduce`` per step (timed in the one arm, passed through in the other); each
block's median step comes from the loop's own clock, and the process's CPU time per step
(every thread) beside it. A loaded machine moves both arms alike: the ratios of the medians
of the block figures are the cost.

    python -m benchmarks.overhead.comm_hook_cost --blocks 16 --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist

from gputop_train.hook import patches


def build(
    width: int, layers: int, bucket_mb: float
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(width, width) for _ in range(layers)))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.001)


def block(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, steps: int
) -> tuple[float, float]:
    """The median step (wall ms) of ``steps`` steps of ``model``, and the process's CPU time
    per step (ms, every thread: the comm hook's callbacks run on gloo's): CPU time moves far
    less than wall time when other jobs share the cores."""
    times = []
    flag = torch.ones(1)
    cpu_started = time.process_time()
    for _ in range(steps):
        started = time.perf_counter()
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        dist.all_reduce(flag)  # as a loop's loss or metric all-reduce
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times), (time.process_time() - cpu_started) * 1000.0 / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--bucket-mb", type=float, default=0.25, help="0.25: one bucket a layer")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29577", RANK="0", WORLD_SIZE="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    agent = patches.install(torch)
    clock = agent.collectives
    assert clock is not None
    clock.enabled = False
    bare = build(args.width, args.layers, args.bucket_mb)  # as before: no gradient hook
    clock.enabled = True
    timed = build(args.width, args.layers, args.bucket_mb)
    x = torch.randn(32, args.width)
    arms = {"timed": timed, "bare": bare}
    for name, (model, optimizer) in arms.items():  # warm both
        clock.enabled = name == "timed"
        block(model, optimizer, x, 20)
    healthy = True  # the timing never disabled itself after an internal error
    medians: dict[str, list[float]] = {"bare": [], "timed": []}
    cpu: dict[str, list[float]] = {"bare": [], "timed": []}
    for index in range(args.blocks):
        order = ("bare", "timed") if index % 4 in (0, 3) else ("timed", "bare")  # ABBA
        for name in order:
            clock.enabled = name == "timed"  # off: the wrappers pass straight through
            wall, cpu_ms = block(*arms[name], x, args.steps)
            medians[name].append(wall)
            cpu[name].append(cpu_ms)
            healthy = healthy and clock.enabled
    ratio = statistics.median(medians["timed"]) / statistics.median(medians["bare"])
    cpu_ratio = statistics.median(cpu["timed"]) / statistics.median(cpu["bare"])
    extra_us = (statistics.median(cpu["timed"]) - statistics.median(cpu["bare"])) * 1000.0
    clock.enabled = True
    for name, found in medians.items():
        middle, low, high = statistics.median(found), min(found), max(found)
        print(
            f"{name:<6}{middle:.4f} ms/step (blocks {low:.4f}-{high:.4f}), "
            f"CPU {statistics.median(cpu[name]):.4f} ms/step"
        )
    print(f"timed/bare: wall {ratio:.4f}, CPU {cpu_ratio:.4f} ({extra_us:+.0f} us of CPU a step)")
    print(f"the timing never disabled itself: {healthy}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"medians": medians, "ratio": ratio, "args": vars(args)}, default=str, indent=1
            )
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
