"""A first GPT training loop, in fp32: no autocast, PyTorch's default matmul precision
("highest": every matmul in full fp32 on the CUDA cores, while cuDNN's TF32 flag reads on).

GPT-2 small (124M), block 1024, batch 8 of random tokens made on the GPU, AdamW (foreach,
the default), gradient clipping.

Fixes, as flags and as live knobs: --precision bf16, --matmul-precision high.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, lm_step, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, parser, run, steps

OPTIONS = (
    Option("precision", "fp32", choices=("fp32", "bf16"), role="precision"),
    Option("matmul_precision", "highest", choices=("highest", "high"), role="matmul_precision"),
)


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "foreach")
    torch.set_float32_matmul_precision(args.matmul_precision)
    state = Knobs.of(args, OPTIONS, apply={"matmul_precision": torch.set_float32_matmul_precision})
    for _ in steps(args):
        bf16 = CUDA and state["precision"] == "bf16"
        lm_step(model, optimizer, cfg, args.batch_size, bf16=bf16, clip=model)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=8, options=OPTIONS))
