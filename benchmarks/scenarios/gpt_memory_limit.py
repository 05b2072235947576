"""A GPT (GPT-2 small's width, 6 layers) at the largest micro-batch that fits: GPU memory
over 90% used, one allocation away from an OOM, as users size it by trying.

bf16 autocast, scaled_dot_product_attention, fused AdamW, eager; the micro-batch grows step by
step until the GPU is about 94% full.

Candidate changes, as flags and as live knobs: --checkpointing (activation checkpointing:
frees most activations, recomputes them), --batch-size N (the micro-batch; the accumulation
grows to keep the tokens per step), --compile.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, count_samples, parser, run, steps

FILL = 0.94  # of the GPU's memory, as NVML counts it (the CUDA context included)


def step(forward, model, optimizer, micro: int, accumulation: int, block: int, vocab: int) -> None:
    for _ in range(accumulation):
        x = torch.randint(vocab, (micro, block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = forward(x, x.roll(-1, dims=1)) / accumulation
        loss.backward()
        count_samples(micro)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def largest_micro_batch(model: GPT, optimizer: torch.optim.Optimizer) -> int:
    """Grow the micro-batch by 8% a step until the GPU is FILL full (as NVML counts it: the
    allocator's cache and the CUDA context included), then keep the last that fitted. On the
    H100 an estimate from two probe steps landed at 76% (the cache grew less than it said)."""
    cfg, micro, fitted = model.config, 8, 8
    while True:
        try:
            step(model, model, optimizer, micro, 1, cfg.block, cfg.vocab)
        except torch.OutOfMemoryError:
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return fitted
        fitted = micro
        free, total = torch.cuda.mem_get_info()
        if (total - free) / total >= FILL:
            return fitted
        micro = int(micro * 1.08) + 1


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small, layers=6)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    micro = args.batch_size or (largest_micro_batch(model, optimizer) if CUDA else 4)
    print(f"micro-batch {micro}", flush=True)
    state = Knobs(accumulation=1)
    tokens_per_step = micro  # sequences per optimizer step, kept when the micro-batch shrinks

    def set_micro(value: int) -> None:
        state["accumulation"] = max(1, round(tokens_per_step / value))

    def set_checkpointing(value: bool) -> None:
        model.checkpointing = value

    state.declare("batch_size", micro, apply=set_micro, minimum=1, maximum=100_000,
                  role="batch_size")  # fmt: skip
    state.declare("checkpointing", False, apply=set_checkpointing, role="checkpointing")
    state.compile(model)
    for _ in steps(args):
        step(state["forward"], model, optimizer, state["batch_size"], state["accumulation"],
             cfg.block, cfg.vocab)  # fmt: skip


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--batch-size", type=int, default=0, help="0: the largest that fits")
    run(train, options)
