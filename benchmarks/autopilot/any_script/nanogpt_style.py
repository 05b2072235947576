"""A GPT-2 (124M) training loop the way nanoGPT's train.py writes it: get_batch from a token
array, bf16 autocast, gradient accumulation, fused AdamW, gradient clipping, TF32 on; run with
``--compile False`` as users do where compiling is slow or breaks. Random tokens, no download.
It declares no gputop-train knob. The model is demos/gpt.py's (nanoGPT's model.py): the shape
of the copy that docs/autopilot.md measured (``git show
045b02a:benchmarks/autopilot/any_script/nanogpt_style.py``), with nanoGPT's initial weights.

    python nanogpt_style.py --compile False        # the configuration under test
    python nanogpt_style.py --compile True         # the fix in its own flags
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "demos"))
from gpt import GPT, GPTConfig  # nanoGPT's model.py, as its train.py imports it

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=12)
parser.add_argument("--block_size", type=int, default=1024)
parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
parser.add_argument("--compile", type=lambda s: s == "True", default=False)
parser.add_argument("--dtype", default="bfloat16")
parser.add_argument("--max_iters", type=int, default=600000)
parser.add_argument("--max_seconds", type=float, default=0.0)
parser.add_argument("--log_interval", type=int, default=10)
parser.add_argument("--device", default="cuda")
parser.add_argument("--n_layer", type=int, default=12)
parser.add_argument("--n_head", type=int, default=12)
parser.add_argument("--n_embd", type=int, default=768)


def main() -> None:
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = args.device
    device_type = "cuda" if "cuda" in device else "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    data = torch.randint(0, 50257, (20_000_000,), dtype=torch.int64)  # train.bin, in memory

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
        x = torch.stack([data[i : i + args.block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + args.block_size] for i in ix])
        if device_type == "cuda":
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        return x, y

    shape = GPTConfig(
        block=args.block_size, layers=args.n_layer, heads=args.n_head, width=args.n_embd
    )
    model = GPT(shape).to(device)
    for module in model.modules():  # nanoGPT's _init_weights
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    scaler = torch.amp.GradScaler(device_type, enabled=(args.dtype == "float16"))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device_type == "cuda"
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=6e-4,
        betas=(0.9, 0.95),
        fused=fused,
    )
    if args.compile:
        model = torch.compile(model)
    X, Y = get_batch()
    t0 = started = time.time()
    for iter_num in range(args.max_iters):
        lr = 6e-4 * min(1.0, (iter_num + 1) / 2000) * (0.5 + 0.5 * math.cos(0))
        for group in optimizer.param_groups:
            group["lr"] = lr
        for _ in range(args.gradient_accumulation_steps):
            with ctx:
                loss = model(X, Y)
                loss = loss / args.gradient_accumulation_steps
            X, Y = get_batch()
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if iter_num % args.log_interval == 0:
            t1 = time.time()
            lossf = loss.item() * args.gradient_accumulation_steps
            print(f"iter {iter_num}: loss {lossf:.4f}, time {(t1 - t0) * 1000:.2f}ms", flush=True)
            t0 = t1
        if args.max_seconds and time.time() - started > args.max_seconds:
            break


if __name__ == "__main__":
    main()
