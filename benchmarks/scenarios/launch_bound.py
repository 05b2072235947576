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
from _scenario import DEVICE, Knobs, Option, classify, parser, random_batches, run

OPTIONS = (
    Option("compile", False, role="compile"),
    Option("batch_size", None, minimum=1, maximum=65536, role="batch_size"),
)


def block(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU()
    )


def train(args: argparse.Namespace) -> None:
    width = 128 if args.small else 512
    model = torch.nn.Sequential(*(block(width) for _ in range(8)), torch.nn.Linear(width, 10))
    model = model.to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    knobs = Knobs.of(args, OPTIONS, model)
    for x, y in random_batches(args, knobs, (width,), 10):
        classify(knobs["forward"], optimizer, x, y, bf16=False, samples=True)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=32, options=OPTIONS))
