"""The largest batch that fits: GPU memory over 90% used, one allocation away from an OOM.

An MLP (width 4096, 8 layers) in bf16 whose batch is sized, as users size it, by trying: two
probe steps measure the memory a sample takes, and the batch is the one that fills about 94%
of the GPU. The GPU is busy and the step is healthy; the risk is the memory.

Candidate changes, as flags and as live knobs: --batch-size N (half the batch: no faster,
the check is that the advisor warns without inventing a speed-up).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import CUDA, DEVICE, Knobs, Option, count_samples, mlp, parser, run, steps

FILL = 0.94  # of the GPU's memory, as NVML counts it (the CUDA context included)
OPTIONS = (Option("batch_size", None, minimum=1, maximum=10_000_000, role="batch_size"),)


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: int, width: int) -> None:
    x = torch.randn(batch, width, device=DEVICE)
    y = torch.randint(0, 1000, (batch,), device=DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    count_samples(batch)
    optimizer.step()


def largest_batch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, width: int) -> int:
    """Two probe steps: the memory one more sample takes, then the batch that fills FILL."""
    peaks = []
    for batch in (1024, 2048):
        torch.cuda.reset_peak_memory_stats()
        step(model, optimizer, batch, width)
        peaks.append(torch.cuda.max_memory_reserved())
    per_sample = (peaks[1] - peaks[0]) / 1024
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    room = free + reserved - (1 - FILL) * total  # what the allocator may still take
    batch = max(2048, int((room - (peaks[0] - 1024 * per_sample)) / per_sample))
    while True:  # the estimate may be a little off: shrink until a step fits
        try:
            step(model, optimizer, batch, width)
            return batch
        except torch.OutOfMemoryError:
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            batch = int(batch * 0.95)


def train(args: argparse.Namespace) -> None:
    width = 256 if args.small else 4096
    model = mlp(width, 8, 1000).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=CUDA)
    batch = args.batch_size or (largest_batch(model, optimizer, width) if CUDA else 64)
    print(f"batch {batch}", flush=True)
    knobs = Knobs.of(args, OPTIONS, batch_size=batch)
    for _ in steps(args):
        step(model, optimizer, knobs["batch_size"], width)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=0, options=OPTIONS))  # 0: the largest that fits
