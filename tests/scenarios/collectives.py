"""torchrun ranks that wait for each other in collectives, with known truths (CPU gloo).

Usage: torchrun ... collectives.py SCENARIO [key=value ...]; the hook is armed by the
launcher's environment, as for a user's script. Each rank writes its own clock's truth to
``truth_dir/rank-N.json`` when ``truth_dir`` is given: ``comm`` (ms around its gradient
exchange, each step) and ``step_ms`` (each step's wall time).

Scenarios: ``ddp`` (DistributedDataParallel), ``manual`` (gradients all-reduced by explicit
``dist.all_reduce`` calls, as hand-written data parallelism does), ``fsdp`` (``fully_shard``).
Rank ``slow_rank`` is slowed on purpose: ``slow_step_ms`` more compute before each forward,
``slow_data_ms`` more to load each batch, or ``stall_s`` once at step ``stall_step``.
Every rank: ``workers`` DataLoader workers (0), ``data_ms`` to load each batch (0).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset, default_collate
from torch.utils.data.distributed import DistributedSampler


def _params(argv: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in (arg.split("=", 1) for arg in argv):
        try:
            params[key] = float(value)
        except ValueError:
            params[key] = value
    return params


class _SlowCollate:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, items: list[Any]) -> Any:
        time.sleep(self.delay_s)
        return default_collate(items)


def main(scenario: str, p: dict[str, Any]) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    slowed = rank == int(p.get("slow_rank", -1))
    width, batch, steps = int(p.get("width", 16)), int(p.get("batch", 8)), int(p.get("steps", 60))
    model: Any = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, 2))
    if scenario == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif scenario == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    items = batch * 16 * world
    data = TensorDataset(torch.randn(items, width), torch.randint(0, 2, (items,)))
    # data_ms: every rank's batches that late (in its workers, with workers); slow_data_ms:
    # the slowed rank's, more.
    data_s = p.get("data_ms", 0) / 1000.0 + (p.get("slow_data_ms", 0) / 1000.0 if slowed else 0)
    workers = int(p.get("workers", 0))
    loader = DataLoader(
        data,
        batch_size=batch,
        sampler=DistributedSampler(data),
        collate_fn=_SlowCollate(data_s),
        num_workers=workers,
        persistent_workers=workers > 0,
    )
    step_s = p.get("step_ms", 20) / 1000.0 + (p.get("slow_step_ms", 0) / 1000.0 if slowed else 0)
    truth: list[float] = []  # this rank's own clock around the step's gradient exchange
    step_times: list[float] = []  # and around each whole step
    done = 0
    previous = time.perf_counter()
    while done < steps:
        for x, y in loader:
            time.sleep(step_s)  # the step's compute, as a sleep: 2 cores shared by many
            if slowed and done + 1 == int(p.get("stall_step", -1)):
                time.sleep(p.get("stall_s", 0))
            loss = torch.nn.functional.cross_entropy(model(x), y)
            started = time.perf_counter()
            # The model is two small layers: DDP's and FSDP's backward is mostly their wait
            # in the collectives (an upper bound on it).
            loss.backward()
            if scenario == "manual":
                started = time.perf_counter()  # the truth is the all-reduces alone
                for parameter in model.parameters():
                    dist.all_reduce(parameter.grad)
            truth.append((time.perf_counter() - started) * 1000.0)
            optimizer.step()
            optimizer.zero_grad()
            now = time.perf_counter()
            step_times.append((now - previous) * 1000.0)
            previous = now
            done += 1
            if done == steps:
                break
    if p.get("truth_dir"):
        own = {"comm": truth, "step_ms": step_times}
        Path(p["truth_dir"], f"rank-{rank}.json").write_text(json.dumps(own))
    print(f"rank {rank} of {world} done", flush=True)
    dist.barrier()  # all ranks done before any tears down (torch 2.14.1 gloo aborts otherwise)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1], _params(sys.argv[2:]))
