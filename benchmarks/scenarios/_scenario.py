"""What every scenario script shares: the hook's knob API where present, when to stop, and a
clean exit on Ctrl+C. The training loops themselves are written out in each script, as their
users write them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

try:  # under gputop-train the hook is loaded; a scenario runs the same without it
    import gputop_train.hook as hook
except ImportError:
    hook = None

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def knob(name: str, value: Any, apply: Callable[[Any], None], **spec: Any) -> None:
    """Declare a live knob (docs/knobs.md); nothing without gputop-train."""
    if hook is not None:
        hook.knob(name, value, apply, **spec)


def tiny_cnn(classes: int) -> torch.nn.Module:
    """The model of ``--small`` runs: a CPU trains it as fast as a GPU trains the real one,
    so the input pipeline is what a CPU run measures (the tests' CPU scenarios)."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=4),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, classes),
    )


class CachedImages(torch.utils.data.Dataset):
    """Preprocessed images kept in memory (as a cache of decoded, resized tensors on disk
    would give them): each sample costs a lookup, so the workers are never the limit."""

    def __init__(self, side: int, dtype: torch.dtype, distinct: int = 64) -> None:
        # One seed: the float and uint8 caches of a scenario hold the same images and labels,
        # as a dataset cached two ways does. Drawn apart, switching between them changed the
        # data under a model that had learnt it (the loss 0.5 -> 11.6 on the H100, 2026-11-25:
        # the numerics guard reverted the uint8 trial).
        generator = torch.Generator().manual_seed(side)
        shape = (distinct, 3, side, side)
        images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
        self.images = images if dtype == torch.uint8 else (images.float() / 127.5 - 1.0)
        self.labels = torch.randint(0, 1000, (distinct,), generator=generator)

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[index % len(self.images)], self.labels[index % len(self.labels)]


def mlp(width: int, depth: int, classes: int) -> torch.nn.Module:
    """Wide linear layers: matrix products, what tensor cores do best."""
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, classes))


def count_samples(samples: int) -> None:
    """Samples of a step for loops without a DataLoader (docs/knobs.md)."""
    if hook is not None:
        hook.count_samples(samples)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every scenario takes; each adds its own fixes as flags."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=0, help="stop after N steps (0: never)")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after S seconds")
    parser.add_argument(
        "--small",
        action="store_true",
        default=not CUDA,
        help="CPU-sized model and data (the default without CUDA)",
    )
    return parser


class Stop:
    """``--steps`` / ``--seconds``: True once either is reached (0 means no limit)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.steps_left = args.steps or -1
        self.deadline = time.monotonic() + args.seconds if args.seconds else None
        self.done = False

    def step(self) -> bool:
        self.steps_left -= 1
        late = self.deadline is not None and time.monotonic() >= self.deadline
        self.done = self.steps_left == 0 or late
        return self.done


def run(train: Callable[[argparse.Namespace], None], args: argparse.Namespace) -> None:
    """Train, and exit 130 on Ctrl+C as a training script should."""
    print(f"{os.path.basename(sys.argv[0])}: {vars(args)} on {DEVICE}", flush=True)
    try:
        train(args)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    print("done", flush=True)
