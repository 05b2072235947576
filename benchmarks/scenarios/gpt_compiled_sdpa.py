"""A tuned GPT loop: compiled, bf16, scaled_dot_product_attention, fused AdamW. Whether it is
healthy is for the measurement to say: the candidates are tried, not assumed to fail.

A GPT of GPT-2 small's width and 6 layers, block 1024, batch 16 of random tokens made on the
GPU.

Candidate changes, as flags and as live knobs: --batch-size N, --no-compile.
"""

from __future__ import annotations

import argparse

from _gpt import GPT, config, lm_step, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, parser, run, steps

OPTIONS = (
    # no C++ compiler assumed on the CPU box: compiled on CUDA only
    Option("compile", CUDA, "--no-compile", role="compile"),
    Option("batch_size", None, minimum=1, maximum=256, role="batch_size"),
)


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small, layers=6)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    state = Knobs.of(args, OPTIONS, model)
    for _ in steps(args):
        lm_step(state["forward"], optimizer, cfg, state["batch_size"])


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(4, 16), options=OPTIONS))
