"""GPT-2 small's shape in bf16, eager, with attention written out by hand as in a textbook:
softmax(q @ k^T / sqrt(d), causal mask) @ v, the T x T scores materialized in every layer.

Batch 8 of 1024 random tokens made on the GPU, bf16 autocast, fused AdamW.

Fixes, as flags and as live knobs: --attention sdpa (scaled_dot_product_attention), --compile.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, count_samples, parser, run, steps


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    model = GPT(cfg).to(DEVICE)
    model.set_attention(args.attention)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    forward = Knobs()
    forward.declare("attention", args.attention, apply=model.set_attention,
                    choices=("manual", "sdpa"), role="attention")  # fmt: skip
    forward.compile(model, args.compile)
    for _ in steps(args):
        x = torch.randint(cfg.vocab, (args.batch_size, cfg.block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = forward["forward"](x, x.roll(-1, dims=1))
        loss.backward()
        count_samples(args.batch_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=8)
    options.add_argument("--attention", choices=("manual", "sdpa"), default="manual")
    options.add_argument("--compile", action="store_true")
    run(train, options)
