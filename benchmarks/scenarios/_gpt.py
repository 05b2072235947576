"""The model of the transformer scenarios: demos/gpt.py's GPT (nanoGPT's model.py), as a
training script imports its model file. ``--small`` runs (the CPU) get a tiny one."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demos"))

from gpt import GPT, GPTConfig, make_optimizer

__all__ = ["GPT", "GPTConfig", "config", "make_optimizer"]


def config(small: bool, **shape: int) -> GPTConfig:
    """GPT-2 small's shape (124M parameters), or the tiny CPU one; ``shape`` overrides."""
    base = GPTConfig.tiny() if small else GPTConfig()
    for name, value in shape.items():
        if not small:
            setattr(base, name, value)
    return base
