"""A small model on small batches: each step is a few hundred tiny kernels, and the CPU that
launches them one by one is slower than the GPU that runs them.

An 8-layer MLP (width 512, LayerNorm, GELU) on batches of 32 already on the GPU, AdamW: the
shape of a small policy or tabular model, trained step by step (the loop declares its samples
with count_samples).

Fixes, as flags and as live knobs: --compile (fused kernels), --batch-size N.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import DEVICE, Stop, count_samples, knob, parser, run


def block(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU()
    )


def train(args: argparse.Namespace) -> None:
    width = 128 if args.small else 512
    model = torch.nn.Sequential(*(block(width) for _ in range(8)), torch.nn.Linear(width, 10))
    model = model.to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = {"forward": model, "batch": args.batch_size}

    def set_compile(value: bool) -> None:
        state["forward"] = torch.compile(model) if value else model

    def set_batch(value: int) -> None:
        state["batch"] = value

    knob("compile", args.compile, set_compile, role="compile")
    knob("batch_size", args.batch_size, set_batch, minimum=1, maximum=65536, role="batch_size")
    set_compile(args.compile)
    stop = Stop(args)
    while not stop.done:
        batch = state["batch"]
        x = torch.randn(batch, width, device=DEVICE)
        y = torch.randint(0, 10, (batch,), device=DEVICE)
        loss = F.cross_entropy(state["forward"](x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        count_samples(batch)
        optimizer.step()
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--compile", action="store_true")
    options.add_argument("--batch-size", type=int, default=32)
    run(train, options.parse_args())
