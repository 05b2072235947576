"""A healthy job: wide matrix products in bf16 keep the GPU busy; nothing else holds it back.

An MLP of 4 layers of width 8192 on batches of 8192 already on the GPU, bf16 autocast, fused
AdamW: the arithmetic is the work, and it runs on the tensor cores.

Candidate changes, as flags and as live knobs: --compile, --batch-size N (neither should pay
much: a check that the advisor says "healthy" instead of inventing a bottleneck).
"""

from __future__ import annotations

import argparse

import torch
from _scenario import CUDA, DEVICE, Knobs, Option, classify, mlp, parser, random_batches, run

OPTIONS = (
    Option("compile", False, role="compile"),
    Option("batch_size", None, minimum=1, maximum=65536, role="batch_size"),
)


def train(args: argparse.Namespace) -> None:
    width = 256 if args.small else 8192
    model = mlp(width, 4, 1000).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=CUDA)
    knobs = Knobs.of(args, OPTIONS, model)
    for x, y in random_batches(args, knobs, (width,), 1000):
        classify(knobs["forward"], optimizer, x, y, bf16=True, samples=True)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(64, 8192), options=OPTIONS))
