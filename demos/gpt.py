"""The LLM ladder: a small GPT (nanoGPT's model, GPT-2 small's shape) trained on random tokens,
with a flag and a live knob per rung.

Rung 0 is how a first GPT loop is often written: fp32, attention by hand (softmax of q @ k^T),
eager, AdamW with foreach=False. Each flag is one rung:

    python demos/gpt.py                                               # rung 0
    python demos/gpt.py --precision bf16                              # rung 1
    python demos/gpt.py --precision bf16 --attention sdpa             # rung 2
    python demos/gpt.py --precision bf16 --attention sdpa --optimizer fused --compile  # rung 4
    python demos/gpt.py ... --micro-batch 4 --accumulation 4 --checkpointing  # memory rungs

Under gputop-train (``gputop-train demos/gpt.py``) every rung is also a knob (docs/knobs.md).
The script prints its own meter every 5 s: tokens/s and nanoGPT's MFU formula
(``estimate_mfu``: 6N + 12 L H Q T FLOPs per token), the figures gputop-train is checked
against. Without CUDA it runs on the CPU with a tiny model.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

try:  # under gputop-train the hook is loaded; the demo runs the same without it
    import gputop_train.hook as hook
except ImportError:
    hook = None

LOG_EVERY_S = 5.0


@dataclass
class GPTConfig:
    vocab: int = 50304  # GPT-2's 50257 rounded up to a multiple of 64, as nanoGPT does
    block: int = 1024
    layers: int = 12
    heads: int = 12
    width: int = 768

    @classmethod
    def tiny(cls) -> GPTConfig:
        return cls(vocab=512, block=64, layers=2, heads=4, width=64)


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.qkv = nn.Linear(c.width, 3 * c.width)
        self.proj = nn.Linear(c.width, c.width)
        self.heads = c.heads
        self.attention = "sdpa"  # or "manual": softmax(q @ k^T / sqrt(d)) @ v
        mask = torch.tril(torch.ones(c.block, c.block, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, c.block, c.block), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            scores = scores.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c.width), nn.LayerNorm(c.width)
        self.attn = CausalSelfAttention(c)
        self.mlp = nn.Sequential(
            nn.Linear(c.width, 4 * c.width), nn.GELU(), nn.Linear(4 * c.width, c.width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT: token and position embeddings, pre-norm blocks, the output layer tied
    to the token embedding."""

    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.config = c
        self.wte, self.wpe = nn.Embedding(c.vocab, c.width), nn.Embedding(c.block, c.width)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.width)
        self.head = nn.Linear(c.width, c.vocab, bias=False)
        self.head.weight = self.wte.weight
        self.checkpointing = False

    def set_attention(self, mode: str) -> None:
        for block in self.blocks:
            block.attn.attention = mode

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            if self.checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def flops_per_token(self) -> int:
        """nanoGPT's estimate_mfu: 6N + 12 L H Q T, N without the position embedding."""
        c = self.config
        params = sum(p.numel() for p in self.parameters()) - self.wpe.weight.numel()
        return 6 * params + 12 * c.layers * c.heads * (c.width // c.heads) * c.block


def make_optimizer(model: nn.Module, kind: str) -> torch.optim.Optimizer:
    """AdamW as "for-loop" (foreach=False), "foreach" or "fused"."""
    options = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {}}
    if kind == "fused":
        options["fused"] = {"fused": True}
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **options[kind])


def set_update_kernel(optimizer: torch.optim.Optimizer, kind: str) -> None:
    """Switch AdamW's update kernel in place. Its moments and step counts carry over: a new
    AdamW restarts them, and a fresh Adam's first steps move every weight by about the
    learning rate (the gradient norm rose 0.96 -> 1.52 on the H100 ladder, 2026-11-25, and
    gputop-train's numerics guard reverted the change). A fused update keeps its step counts
    on the parameters' device, the others on the CPU."""
    fused = kind == "fused"
    for group in optimizer.param_groups:
        group["foreach"] = kind == "foreach"
        group["fused"] = fused
        for param in group["params"]:
            state = optimizer.state.get(param)
            if state and "step" in state:
                device = param.device if fused else torch.device("cpu")
                state["step"] = state["step"].to(device=device, dtype=torch.float32)


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.device = args.device
        config = GPTConfig() if self.device.startswith("cuda") else GPTConfig.tiny()
        self.model = GPT(config).to(self.device)
        self.model.set_attention(args.attention)
        self.model.checkpointing = args.checkpointing
        self.optimizer = make_optimizer(self.model, args.optimizer)
        self.new_optimizer: str | None = None
        self.forward: Any = torch.compile(self.model) if args.compile else self.model
        torch.set_float32_matmul_precision(args.matmul_precision)
        self.steps = 0

    def declare_knobs(self) -> None:
        """Every rung of the LLM ladder as a knob, under gputop-train."""
        if hook is None:
            return
        a = self.args
        hook.knob("precision", a.precision, self.set_precision, choices=("fp32", "bf16"),
                  help="autocast dtype (rung 1)", role="precision")  # fmt: skip
        hook.knob("matmul_precision", a.matmul_precision, torch.set_float32_matmul_precision,
                  choices=("highest", "high"), help="fp32 matmuls on TF32 tensor cores",
                  role="matmul_precision")  # fmt: skip
        hook.knob("attention", a.attention, self.model.set_attention, choices=("manual", "sdpa"),
                  help="hand-written softmax(q k^T) v or scaled_dot_product_attention (rung 2)",
                  role="attention")  # fmt: skip
        hook.knob("optimizer", a.optimizer, self.set_optimizer,
                  choices=("for-loop", "foreach", "fused"), help="AdamW implementation (rung 3)",
                  role="optimizer")  # fmt: skip
        hook.knob("compile", a.compile, self.set_compile, help="torch.compile (rung 4)",
                  role="compile")  # fmt: skip
        hook.knob("micro_batch", a.micro_batch, self.set_micro_batch, minimum=1, maximum=1024,
                  help="sequences per forward", role="batch_size")  # fmt: skip
        hook.knob("accumulation", a.accumulation, self.set_accumulation, minimum=1,
                  maximum=1024, help="micro-batches per optimizer step")  # fmt: skip
        hook.knob("checkpointing", a.checkpointing, self.set_checkpointing,
                  help="recompute each block in backward", role="checkpointing")  # fmt: skip

    def set_precision(self, value: str) -> None:
        self.args.precision = value

    def set_optimizer(self, value: str) -> None:
        self.new_optimizer = value  # inside optimizer.step(): switched before the next one

    def set_compile(self, value: bool) -> None:
        self.args.compile = value
        self.forward = torch.compile(self.model) if value else self.model

    def set_micro_batch(self, value: int) -> None:
        self.args.micro_batch = value

    def set_accumulation(self, value: int) -> None:
        self.args.accumulation = value

    def set_checkpointing(self, value: bool) -> None:
        self.model.checkpointing = value

    def autocast(self) -> Any:
        if self.args.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16)

    def train_step(self) -> torch.Tensor:
        if self.new_optimizer is not None:
            self.args.optimizer, self.new_optimizer = self.new_optimizer, None
            set_update_kernel(self.optimizer, self.args.optimizer)
        a, block = self.args, self.model.config.block
        total = torch.zeros((), device=self.device)
        for _ in range(a.accumulation):
            x = torch.randint(self.model.config.vocab, (a.micro_batch, block), device=self.device)
            with self.autocast():
                loss = self.forward(x, x.roll(-1, dims=1)) / a.accumulation
            loss.backward()
            total += loss.detach()
            if hook is not None:
                hook.count_samples(a.micro_batch)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1
        return total

    def run(self, max_steps: int) -> None:
        last_log, last_steps, tokens = time.monotonic(), 0, 0
        flops_per_token = self.model.flops_per_token()
        while not max_steps or self.steps < max_steps:
            loss = self.train_step()
            tokens += self.args.micro_batch * self.args.accumulation * self.model.config.block
            elapsed = time.monotonic() - last_log
            if elapsed >= LOG_EVERY_S:
                # The script's own meter: tokens/s and nanoGPT's achieved FLOP/s.
                print(
                    f"step {self.steps} loss {loss.item():.3f} "
                    f"{(self.steps - last_steps) / elapsed:.2f} steps/s "
                    f"{tokens / elapsed:,.0f} tokens/s "
                    f"{flops_per_token * tokens / elapsed / 1e12:.3f} TFLOP/s (nanoGPT formula)",
                    flush=True,
                )
                last_log, last_steps, tokens = time.monotonic(), self.steps, 0


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, int]:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if cuda else "cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--matmul-precision", choices=("highest", "high"), default="highest")
    parser.add_argument("--attention", choices=("manual", "sdpa"), default="manual")
    parser.add_argument("--optimizer", choices=("for-loop", "foreach", "fused"),
                        default="for-loop")  # fmt: skip
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--micro-batch", type=int, default=8 if cuda else 4)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--steps", type=int, default=0, help="stop after N steps (0: never)")
    args = parser.parse_args(argv)
    return args, args.steps


def main(argv: list[str] | None = None) -> int:
    args, steps = parse_args(sys.argv[1:] if argv is None else argv)
    print(f"gpt demo: {vars(args)}", flush=True)
    trainer = Trainer(args)
    trainer.declare_knobs()
    try:
        trainer.run(steps)
    except KeyboardInterrupt:
        print(f"interrupted after {trainer.steps} steps", flush=True)
        return 130
    print(f"done: {trainer.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
