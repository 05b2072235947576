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
from _scenario import CUDA, DEVICE, Stop, count_samples, knob, parser, run


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small, layers=6)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    state = {"forward": torch.compile(model) if args.compile else model, "batch": args.batch_size}

    def set_compile(value: bool) -> None:
        state["forward"] = torch.compile(model) if value else model

    def set_batch(value: int) -> None:
        state["batch"] = value

    knob("compile", args.compile, set_compile, role="compile")
    knob("batch_size", args.batch_size, set_batch, minimum=1, maximum=256, role="batch_size")
    stop = Stop(args)
    while not stop.done:
        batch = state["batch"]
        x = torch.randint(cfg.vocab, (batch, cfg.block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = state["forward"](x, x.roll(-1, dims=1))
        loss.backward()
        count_samples(batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--batch-size", type=int, default=None)
    options.add_argument("--no-compile", dest="compile", action="store_false")
    arguments = options.parse_args()
    arguments.batch_size = arguments.batch_size or (4 if arguments.small else 16)
    arguments.compile = arguments.compile and CUDA  # no C++ compiler assumed on the CPU box
    run(train, arguments)
