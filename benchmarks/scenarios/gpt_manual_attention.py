"""GPT-2 small's shape in bf16, eager, with attention written out by hand as in a textbook:
softmax(q @ k^T / sqrt(d), causal mask) @ v, the T x T scores materialized in every layer.

Batch 8 of 1024 random tokens made on the GPU, bf16 autocast, fused AdamW.

Fixes, as flags and as live knobs: --attention sdpa (scaled_dot_product_attention), --compile.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Stop, count_samples, knob, parser, run


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    model = GPT(cfg).to(DEVICE)
    model.set_attention(args.attention)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    forward = {"model": torch.compile(model) if args.compile else model}

    def set_compile(value: bool) -> None:
        forward["model"] = torch.compile(model) if value else model

    knob("attention", args.attention, model.set_attention, choices=("manual", "sdpa"),
         role="attention")  # fmt: skip
    knob("compile", args.compile, set_compile, role="compile")
    stop = Stop(args)
    while not stop.done:
        x = torch.randint(cfg.vocab, (args.batch_size, cfg.block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = forward["model"](x, x.roll(-1, dims=1))
        loss.backward()
        count_samples(args.batch_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--attention", choices=("manual", "sdpa"), default="manual")
    options.add_argument("--compile", action="store_true")
    options.add_argument("--batch-size", type=int, default=8)
    run(train, options.parse_args())
