"""Gradient accumulation over micro-batches already on the GPU, logging the loss with .item()
after every micro-batch: each one makes the CPU wait until the GPU is done.

An MLP (width 1024, 4 layers) on micro-batches of 128, 8 per optimizer step, AdamW, no
DataLoader (the loop declares its samples with count_samples): the shape of a fine-tuning
loop with a small per-device batch.

Fixes, as flags and as live knobs: --log-on-gpu (sum the loss on the GPU, .item() once per
step), --precision bf16, --micro-batch (more samples per launch, as a user with memory to
spare would raise it).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import DEVICE, Knobs, Option, count_samples, mlp, parser, run, steps

# fmt: off
OPTIONS = (
    Option("item_per_micro", True, "--log-on-gpu", role="syncs",
           help=".item() after every micro-batch"),
    Option("precision", "fp32", choices=("fp32", "bf16"), role="precision"),
    Option("micro_batch", 128, minimum=1, maximum=65536, role="batch_size",
           help="samples per micro-batch"),
)
# fmt: on


def train(args: argparse.Namespace) -> None:
    width = 256 if args.small else 1024
    model = mlp(width, 4, 1000).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    config = Knobs.of(args, OPTIONS)
    for step, _ in enumerate(steps(args), 1):
        running: float | torch.Tensor = 0.0
        for _ in range(args.accumulate):
            micro_batch = int(config["micro_batch"])
            x = torch.randn(micro_batch, width, device=DEVICE)
            y = torch.randint(0, 1000, (micro_batch,), device=DEVICE)
            bf16 = config["precision"] == "bf16"
            with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(x), y) / args.accumulate
            loss.backward()
            running = running + (loss.item() if config["item_per_micro"] else loss.detach())
            count_samples(micro_batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 100 == 0:
            print(f"step {step} loss {float(running):.3f}", flush=True)


if __name__ == "__main__":
    options = parser(__doc__, options=OPTIONS)
    options.add_argument("--accumulate", type=int, default=8)
    run(train, options)
