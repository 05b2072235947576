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
from _gpt import GPT, config, lm_step, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, parser, run, steps

FILL = 0.94  # of the GPU's memory, as NVML counts it (the CUDA context included)
OPTIONS = (
    Option("batch_size", None, minimum=1, maximum=100_000, role="batch_size"),
    Option("checkpointing", False, role="checkpointing"),
    Option("compile", False, role="compile"),
)


def largest_micro_batch(model: GPT, optimizer: torch.optim.Optimizer) -> int:
    """Grow the micro-batch by 8% a step until the GPU is FILL full (as NVML counts it: the
    allocator's cache and the CUDA context included), then keep the last that fitted. On the
    H100 an estimate from two probe steps landed at 76% (the cache grew less than it said)."""
    micro, fitted = 8, 8
    while True:
        try:
            lm_step(model, optimizer, model.config, micro)
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
    # sequences per optimizer step, kept by the accumulation when the micro-batch shrinks
    accumulation = {"steps": 1}

    def set_micro(value: int) -> None:
        accumulation["steps"] = max(1, round(micro / value))

    def set_checkpointing(value: bool) -> None:
        model.checkpointing = value

    model.checkpointing = args.checkpointing
    apply = {"batch_size": set_micro, "checkpointing": set_checkpointing}
    state = Knobs.of(args, OPTIONS, model, apply=apply, batch_size=micro)
    for _ in steps(args):
        lm_step(
            state["forward"],
            optimizer,
            cfg,
            state["batch_size"],
            accumulation=accumulation["steps"],
        )


if __name__ == "__main__":
    run(train, parser(__doc__, batch=0, options=OPTIONS))
