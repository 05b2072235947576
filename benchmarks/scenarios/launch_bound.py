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
from _scenario import DEVICE, Knobs, classify, parser, run, steps


def block(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU()
    )


def train(args: argparse.Namespace) -> None:
    width = 128 if args.small else 512
    model = torch.nn.Sequential(*(block(width) for _ in range(8)), torch.nn.Linear(width, 10))
    model = model.to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    knobs = Knobs()
    knobs.compile(model, args.compile)
    knobs.declare("batch_size", args.batch_size, minimum=1, maximum=65536, role="batch_size")
    for _ in steps(args):
        batch = knobs["batch_size"]
        x = torch.randn(batch, width, device=DEVICE)
        y = torch.randint(0, 10, (batch,), device=DEVICE)
        classify(knobs["forward"], optimizer, x, y, bf16=False, samples=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=32)
    options.add_argument("--compile", action="store_true")
    run(train, options)
