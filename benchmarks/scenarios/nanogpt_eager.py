"""nanoGPT's train.py as most people first run it: bf16 autocast, gradient accumulation,
``compile=False``, batches cut from a memmap of uint16 tokens by ``get_batch``.

GPT-2 small (124M), block 1024, micro-batch 8, 4 micro-batches per step, fused AdamW, flash
attention (F.scaled_dot_product_attention): the loop of karpathy/nanoGPT's train.py with its
own meter, printed every 10 iterations as nanoGPT prints it: time per iteration, tokens/s and
nanoGPT's ``estimate_mfu`` FLOPs (6N + 12 L H Q T per token) per second.

Fixes, as flags and as live knobs: --compile, --batch-size N (the micro-batch).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, Stop, count_samples, parser, run

OPTIONS = (
    Option("compile", False, role="compile"),
    Option("batch_size", None, minimum=1, maximum=512, role="batch_size"),
)


def write_tokens(path: str, tokens: int, vocab: int) -> None:
    """prepare.py's output: the token ids as uint16, one flat file."""
    data = np.random.default_rng(0).integers(0, vocab, size=tokens, dtype=np.uint16)
    data.tofile(path)


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small)
    data_dir = tempfile.mkdtemp(prefix="nanogpt-")
    write_tokens(
        os.path.join(data_dir, "train.bin"), 2_000_000 if args.small else 50_000_000, cfg.vocab
    )
    block = cfg.block

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        # nanoGPT recreates the memmap every batch to avoid a memory leak (its comment)
        data = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - block, (state["batch_size"],))
        x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix]
        )
        if CUDA:
            return x.pin_memory().to(DEVICE, non_blocking=True), y.pin_memory().to(
                DEVICE, non_blocking=True
            )
        return x, y

    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    ctx = torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA)
    state = Knobs.of(args, OPTIONS, model)
    flops_per_token = model.flops_per_token()
    accumulation = args.accumulation or (2 if args.small else 4)
    stop = Stop(args)
    x, y = get_batch()
    t0, iter_num = time.time(), 0
    logged_at = t0
    while not stop.done:
        for _micro_step in range(accumulation):
            with ctx:
                loss = state["forward"](x, y) / accumulation
            x, y = get_batch()  # prefetch the next batch while the GPU works
            loss.backward()
            count_samples(state["batch_size"])
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        dt, t0 = t1 - t0, t1
        iter_num += 1
        if iter_num % 10 == 0:
            # nanoGPT prints the last iteration's time; the mean over the last 10 beside it
            # is the figure to compare with a monitor's window.
            tokens = state["batch_size"] * accumulation * block
            lossf = loss.item() * accumulation
            mean_dt, logged_at = (t1 - logged_at) / 10, t1
            print(
                f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, "
                f"mean of 10 {mean_dt * 1000:.2f}ms, {tokens / mean_dt:,.0f} tokens/s, "
                f"{flops_per_token * tokens / mean_dt / 1e12:.2f} TFLOP/s (estimate_mfu)",
                flush=True,
            )
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__, batch=(4, 8), options=OPTIONS)
    options.add_argument("--accumulation", type=int, default=None, help="2 small, 4 full-size")
    run(train, options)
