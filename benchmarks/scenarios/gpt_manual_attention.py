"""GPT-2 small's shape in bf16, eager, with attention written out by hand as in a textbook:
softmax(q @ k^T / sqrt(d), causal mask) @ v, the T x T scores materialized in every layer.

Batch 8 of 1024 random tokens made on the GPU, bf16 autocast, fused AdamW.

Fixes, as flags and as live knobs: --attention sdpa (scaled_dot_product_attention), --compile.
"""

from __future__ import annotations

import argparse

from _gpt import GPT, config, lm_step, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, parser, run, steps

OPTIONS = (
    Option("attention", "manual", choices=("manual", "sdpa"), role="attention"),
    Option("compile", False, role="compile"),
)


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    model = GPT(cfg).to(DEVICE)
    model.set_attention(args.attention)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    forward = Knobs.of(args, OPTIONS, model, apply={"attention": model.set_attention})
    for _ in steps(args):
        lm_step(forward["forward"], optimizer, cfg, args.batch_size)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=8, options=OPTIONS))
