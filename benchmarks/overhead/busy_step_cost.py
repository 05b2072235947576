"""The hook's cost on busy_box.py's step, in one process, and which of its parts it is.

busy_box.py's JOB step (a Linear layer's forward and backward ``--reps`` times, then an SGD
step, one torch thread) in blocks: each hooked variant's block is paired with a bare block
just before it (the hook uninstalled), and a variant's figure is the median of its pairs'
differences, in microseconds a step. Variants: the whole hook (``full``), the agent disabled
(the wrappers alone, and the model's forward marks), no forward marks (``-model``), no
step-end work (``-stepend``), no backward work in the agent (``-backward``). Pairs, not
block means: the dev box's VM wanders by 10-50% between blocks, its pairs far less.

Runs against whichever tree is first on ``PYTHONPATH`` (main's, to compare)::

    heavy -x .venv/bin/python benchmarks/overhead/busy_step_cost.py --rounds 8
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from gputop_train.hook import patches
from gputop_train.hook.agent import Agent

Undo = Callable[[], None]


def _swap(owner: Any, name: str, value: Any) -> Undo:
    old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    return lambda: setattr(owner, name, old)


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _both(first: Undo, second: Undo) -> Undo:
    return lambda: (first(), second())[-1]


def variants(agent: Agent) -> dict[str, Callable[[], Undo]]:
    """Each variant's set-up; its return value undoes it."""
    return {
        "full": lambda: lambda: None,
        "disabled": lambda: _swap(agent, "enabled", False),
        "-model": lambda: _swap(agent._model, "active", False),
        "-stepend": lambda: _both(
            _swap(Agent, "on_optimizer_step", _noop), _swap(Agent, "on_optimizer_pre_step", _noop)
        ),
        "-backward": lambda: _both(
            _swap(Agent, "on_backward", _noop), _swap(Agent, "on_backward_end", _noop)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="pairs per variant")
    parser.add_argument("--reps", type=int, default=6, help="forward+backward a step")
    parser.add_argument("--steps", type=int, default=60, help="steps a block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Linear(256, 256)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256)

    def step() -> None:
        for _ in range(args.reps):
            model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    def block() -> float:
        started = time.perf_counter()
        for _ in range(args.steps):
            step()
        return (time.perf_counter() - started) / args.steps * 1e6

    agent = patches.install(torch)
    for _ in range(50):  # warm-up, left out; the model is found at the first step
        step()
    setups = variants(agent)
    diffs: dict[str, list[float]] = {name: [] for name in setups}
    bare: list[float] = []
    for _ in range(args.rounds):
        for name, setup in setups.items():
            patches.uninstall()
            bare.append(block())
            patches.install(torch)
            step()  # the model found again
            undo = setup()
            diffs[name].append(block() - bare[-1])
            undo()
    print(f"bare step {statistics.median(bare):.0f} us (median of {len(bare)} blocks), "
          f"model {agent._model.model}")  # fmt: skip
    for name, values in diffs.items():
        ordered = sorted(values)
        print(
            f"  {name:10s} +{statistics.median(values):6.1f} us a step "
            f"({statistics.median(values) / statistics.median(bare) * 100:+5.2f}%), "
            f"quartiles {ordered[len(values) // 4]:.0f}..{ordered[3 * len(values) // 4]:.0f}"
        )


if __name__ == "__main__":
    main()
