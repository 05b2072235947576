"""The demo under torchrun: ResNet-18 on the fake CIFAR-10, DDP over every rank, with a flag
that slows one rank on purpose (the straggler the advisor should name, docs/ranks.md).

    gputop-train -- torchrun --standalone --nproc-per-node 2 demos/resnet_ddp.py --workers 4
    gputop-train -- torchrun --standalone --nproc-per-node 2 demos/resnet_ddp.py \\
        --workers 4 --slow-rank 1 --slow-input-ms 40

One GPU per rank (NCCL) where CUDA is present, else CPU ranks over gloo with the demo's
small CPU configuration. The rung flags of demos/resnet.py apply to every rank; live knobs
are not declared here (a change would have to reach every rank at the same step).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, default_collate
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resnet import DATASET_IMAGES, FakeCifar, parse_args, to_model_input


class SlowCollate:
    """Collates a batch ``delay_s`` later: a rank whose input is slower (a slower disk, a
    busier host). Picklable, so it runs in the DataLoader workers too."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, items: list[Any]) -> Any:
        if self.delay_s:
            time.sleep(self.delay_s)
        return default_collate(items)


def main(argv: list[str]) -> int:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--slow-rank", type=int, default=-1, help="the rank to slow (none)")
    extra.add_argument(
        "--slow-input-ms", type=float, default=0.0, help="more time to load each of its batches"
    )
    extra.add_argument(
        "--slow-step-ms",
        type=float,
        default=0.0,
        help="more host work in each of its forwards (its compute, not its input)",
    )
    slow, rest = extra.parse_known_args(argv)
    config, max_steps, epochs = parse_args(rest)
    cuda = config.device.startswith("cuda")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        config.device = f"cuda:{local_rank}"
        torch.cuda.set_device(config.device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    slowed = rank == slow.slow_rank
    print(f"resnet ddp demo: rank {rank} of {world}{' (slowed)' if slowed else ''}", flush=True)
    dataset = FakeCifar(DATASET_IMAGES, config.input, config.image_size)
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        sampler=DistributedSampler(dataset, shuffle=True),
        num_workers=config.workers,
        pin_memory=config.pin_memory and cuda,
        persistent_workers=config.workers > 0,
        drop_last=True,
        collate_fn=SlowCollate(slow.slow_input_ms / 1000.0 if slowed else 0.0),
    )
    model = torchvision.models.resnet18(num_classes=10).to(config.device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    forward = torch.compile(model) if config.compile else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision)
    scaler = torch.amp.GradScaler(enabled=config.precision == "fp16")
    step_delay_s = slow.slow_step_ms / 1000.0 if slowed else 0.0
    if step_delay_s:  # in the forward: host time before it would be the rank's input
        model.register_forward_pre_hook(lambda module, args: time.sleep(step_delay_s))
    steps = 0
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        for images, labels in loader:
            images = to_model_input(images, config)
            labels = labels.to(config.device, non_blocking=config.pin_memory)
            with torch.autocast(
                config.device.split(":")[0], dtype=dtype, enabled=dtype is not None
            ):
                loss = F.cross_entropy(forward(images), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            steps += 1
            if max_steps and steps >= max_steps:
                break
        if max_steps and steps >= max_steps:
            break
    print(f"rank {rank} done: {steps} steps", flush=True)
    dist.barrier()  # all ranks done before any tears down (gloo can abort at exit otherwise)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
