"""The GPT demo's own knobs keep the training it is in the middle of."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from gpt import set_update_kernel


def _adamw_steps(kinds: list[str]) -> torch.Tensor:
    """The weights after one AdamW step per entry, the update kernel switched to each in turn."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, foreach=False)
    for kind in kinds:
        set_update_kernel(optimizer, kind)
        model(torch.randn(16, 8)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return model.weight.detach().clone()


@pytest.mark.parametrize("kind", ["foreach", "fused"])
def test_switching_the_update_kernel_keeps_adams_moments_and_step_counts(kind: str) -> None:
    # A fresh optimizer would restart the moments: its first steps move every weight by about
    # the learning rate, and the weights would part from the uninterrupted run at once.
    uninterrupted = _adamw_steps(["for-loop"] * 6)
    switched = _adamw_steps(["for-loop"] * 3 + [kind] * 3)
    torch.testing.assert_close(switched, uninterrupted, rtol=1e-5, atol=1e-6)
