"""One GPT (demos/gpt.py: GPT-2 small's shape, bf16 autocast, SDPA, fused AdamW) on one GPU or
under torchrun as DDP or FSDP2, with its own meter: the job's GPUs' figures and MFU are read
against it on a node of several GPUs (docs/gpus.md, issue 37).

    python benchmarks/ranks/gpt_ranks.py --seconds 30                      # one GPU, GPU-bound
    python benchmarks/ranks/gpt_ranks.py --seconds 30 --input-ms 300       # input-bound loader
    torchrun --standalone --nproc-per-node 2 benchmarks/ranks/gpt_ranks.py --mode ddp --seconds 30
    torchrun --standalone --nproc-per-node 2 benchmarks/ranks/gpt_ranks.py --mode fsdp2 --seconds 30

The meter prints, every 5 s from rank 0: steps/s, tokens/s of this rank, and TFLOP/s per GPU
by nanoGPT's formula (6N + 12 L H Q T per token, N without the position table), which is the
count the monitor's MFU uses: a job's per-GPU figure is this rank's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demos"))
from gpt import GPT, GPTConfig  # type: ignore[import-not-found]

LOG_EVERY_S = 5.0
# Every rank stops at the same step (one that left early would hang the others in a
# collective): the time is agreed on every this many steps, one small all-reduce.
STOP_CHECK_STEPS = 10


class SlowTokens(torch.utils.data.Dataset):
    """Random token sequences, each taking ``delay_s`` to make (an input-bound loader)."""

    def __init__(self, config: GPTConfig, delay_s: float) -> None:
        self.config, self.delay_s = config, delay_s

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.randint(self.config.vocab, (self.config.block,))


def build(mode: str, device: torch.device, config: GPTConfig) -> tuple[torch.nn.Module, GPT]:
    torch.manual_seed(0)
    model = GPT(config).to(device)
    model.set_attention("sdpa")
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), model
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    return model, model


def done(mine: bool, mode: str, device: torch.device) -> bool:
    """Whether any rank's time is up."""
    if mode == "single":
        return mine
    flag = torch.tensor(float(mine), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("single", "ddp", "fsdp2"), default="single")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--input-ms", type=float, default=0.0, help="ms to make each batch")
    parser.add_argument("--tiny", action="store_true", help="a tiny GPT (a CPU check)")
    args = parser.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if args.mode != "single":
        if cuda:
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    config = GPTConfig.tiny() if args.tiny else GPTConfig()
    forward, model = build(args.mode, device, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    loader = torch.utils.data.DataLoader(
        SlowTokens(model.config, args.input_ms / 1000.0 / args.micro_batch),
        batch_size=args.micro_batch,
        num_workers=0,
    )
    flops_per_token = model.flops_per_token()
    rank0 = int(os.environ.get("RANK", "0")) == 0
    start = last = time.monotonic()
    last_steps = tokens = 0
    for steps, x in enumerate(loader, start=1):
        x = x.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss: Any = forward(x, x.roll(-1, dims=1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += x.numel()
        now = time.monotonic()
        if now - last >= LOG_EVERY_S:
            if cuda:
                torch.cuda.synchronize()
            now = time.monotonic()
            if rank0:
                rate = tokens / (now - last)
                print(
                    f"meter: {args.mode} step {steps} {(steps - last_steps) / (now - last):.3f} "
                    f"steps/s {rate:,.0f} tokens/s/rank "
                    f"{flops_per_token * rate / 1e12:.1f} TFLOP/s/GPU (nanoGPT formula)",
                    flush=True,
                )
            last, last_steps, tokens = now, steps, 0
        if steps % STOP_CHECK_STEPS == 0 and done(now - start >= args.seconds, args.mode, device):
            break
    if args.mode != "single":
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
