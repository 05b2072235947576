"""The model of the transformer scenarios, demos/gpt.py's GPT (nanoGPT's model.py), as a training
script imports its model file (``--small`` runs, the CPU, get a tiny one), and their step."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demos"))

import torch
from _scenario import CUDA, DEVICE, count_samples
from gpt import GPT, GPTConfig, make_optimizer

__all__ = ["GPT", "GPTConfig", "config", "lm_step", "make_optimizer"]


def config(small: bool, **shape: int) -> GPTConfig:
    """GPT-2 small's shape (124M parameters), or the tiny CPU one; ``shape`` overrides."""
    base = GPTConfig.tiny() if small else GPTConfig()
    for name, value in shape.items():
        if not small:
            setattr(base, name, value)
    return base


def lm_step(
    forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    cfg: GPTConfig,
    batch: int,
    bf16: bool = CUDA,
    accumulation: int = 1,
    clip: torch.nn.Module | None = None,
) -> None:
    """One optimizer step on random tokens made on the device: ``accumulation`` micro-batches
    of ``batch`` sequences, bf16 autocast where asked, the gradients of ``clip`` clipped to 1."""
    for _ in range(accumulation):
        x = torch.randint(cfg.vocab, (batch, cfg.block), device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
            loss = forward(x, x.roll(-1, dims=1))
        (loss / accumulation if accumulation > 1 else loss).backward()
        count_samples(batch)
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(clip.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
