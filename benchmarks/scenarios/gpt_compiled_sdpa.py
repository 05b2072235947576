"""A tuned GPT loop: compiled, bf16, scaled_dot_product_attention, fused AdamW. Whether it is
healthy is for the measurement to say: the candidates are tried, not assumed to fail.

A GPT of GPT-2 small's width and 6 layers, block 1024, batch 16 of random tokens made on the
GPU.

Candidate changes, as flags and as live knobs: --batch-size N, --no-compile.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, count_samples, parser, run, steps


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small, layers=6)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    state = Knobs()
    state.compile(model, args.compile)
    state.declare("batch_size", args.batch_size, minimum=1, maximum=256, role="batch_size")
    for _ in steps(args):
        batch = state["batch_size"]
        x = torch.randint(cfg.vocab, (batch, cfg.block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = state["forward"](x, x.roll(-1, dims=1))
        loss.backward()
        count_samples(batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=(4, 16))
    # no C++ compiler assumed on the CPU box: compiled on CUDA only
    options.add_argument("--no-compile", dest="compile", action="store_false", default=CUDA)
    run(train, options)
