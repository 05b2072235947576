"""A first GPT training loop, in fp32: no autocast, PyTorch's default matmul precision
("highest": every matmul in full fp32 on the CUDA cores, while cuDNN's TF32 flag reads on).

GPT-2 small (124M), block 1024, batch 8 of random tokens made on the GPU, AdamW (foreach,
the default), gradient clipping.

Fixes, as flags and as live knobs: --precision bf16, --matmul-precision high.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, count_samples, parser, run, steps


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "foreach")
    torch.set_float32_matmul_precision(args.matmul_precision)
    state = Knobs()
    state.declare("precision", args.precision, choices=("fp32", "bf16"), role="precision")
    state.declare("matmul_precision", args.matmul_precision,
                  apply=torch.set_float32_matmul_precision, choices=("highest", "high"),
                  role="matmul_precision")  # fmt: skip
    for _ in steps(args):
        x = torch.randint(cfg.vocab, (args.batch_size, cfg.block), device=DEVICE)
        bf16 = state["precision"] == "bf16"
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA and bf16):
            loss = model(x, x.roll(-1, dims=1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        count_samples(args.batch_size)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=8)
    options.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    options.add_argument("--matmul-precision", choices=("highest", "high"), default="highest")
    run(train, options)
