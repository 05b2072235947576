"""A healthy job: wide matrix products in bf16 keep the GPU busy; nothing else holds it back.

An MLP of 4 layers of width 8192 on batches of 8192 already on the GPU, bf16 autocast, fused
AdamW: the arithmetic is the work, and it runs on the tensor cores.

Candidate changes, as flags and as live knobs: --compile, --batch-size N (neither should pay
much: a check that the advisor says "healthy" instead of inventing a bottleneck).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import CUDA, DEVICE, Stop, count_samples, knob, mlp, parser, run


def train(args: argparse.Namespace) -> None:
    width = 256 if args.small else 8192
    model = mlp(width, 4, 1000).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=CUDA)
    state = {"forward": model, "batch": args.batch_size}

    def set_compile(value: bool) -> None:
        state["forward"] = torch.compile(model) if value else model

    def set_batch(value: int) -> None:
        state["batch"] = value

    knob("compile", False, set_compile, role="compile")
    knob("batch_size", args.batch_size, set_batch, minimum=1, maximum=65536, role="batch_size")
    stop = Stop(args)
    while not stop.done:
        batch = state["batch"]
        x = torch.randn(batch, width, device=DEVICE)
        y = torch.randint(0, 1000, (batch,), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = F.cross_entropy(state["forward"](x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        count_samples(batch)
        optimizer.step()
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--batch-size", type=int, default=None)
    arguments = options.parse_args()
    arguments.batch_size = arguments.batch_size or (64 if arguments.small else 8192)
    run(train, arguments)
