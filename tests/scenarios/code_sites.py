"""A GPT-like step with hand-written attention, fed by a DataLoader built in a helper, run
under the hook (CPU torch): the hook should name both lines (tests/test_code_sites.py).

Usage: python code_sites.py STEPS [STEP_MS]; each step sleeps STEP_MS more (the advisor
judges 2 s of steps past the warm-up, session/observe.py). Prints
``SITES {"attention": N, "loader": N}``: the lines marked below, read from this file.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

HEADS, HEAD_SIZE, T, WIDTH = 2, 8, 16, 16


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.out = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        q, k, v = self.qkv(x).split(WIDTH, dim=2)
        q, k, v = (t.view(b, T, HEADS, HEAD_SIZE).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / HEAD_SIZE**0.5
        weights = F.softmax(scores, dim=-1)  # <- attention
        return self.out((weights @ v).transpose(1, 2).reshape(b, T, WIDTH))


def make_loader(samples: int) -> DataLoader:
    data = TensorDataset(torch.randn(samples, T, WIDTH), torch.randn(samples, T, WIDTH))
    return DataLoader(data, batch_size=4, num_workers=0)  # <- loader


def marked(tag: str) -> int:
    """The line of this file that carries ``# <- tag``."""
    with open(__file__) as source:
        return next(i for i, line in enumerate(source, 1) if line.rstrip().endswith(f"<- {tag}"))


def main(steps: int, step_ms: float) -> None:
    model = Attention()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in make_loader(4 * steps):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(step_ms / 1000.0)
    print("SITES " + json.dumps({"attention": marked("attention"), "loader": marked("loader")}))


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
