"""What every scenario script shares (issue 47): its options, each declared once as a flag and
a live knob (``Option``; the hook's knob API where present), the loop that stops at
``--steps``/``--seconds`` and rebuilds a DataLoader a knob changed, the batches made on the
device, the image scenarios' model, DataLoader and classifier step, and a clean exit on Ctrl+C.
A scenario script declares what makes it itself: its model, data, step and the fixes it offers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch

try:  # under gputop-train the hook is loaded; a scenario runs the same without it
    import gputop_train.hook as hook
except ImportError:
    hook = None

T = TypeVar("T")
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


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


class Option:
    """A scenario's option that is also its live knob (docs/knobs.md): ``--NAME`` (or ``flag``)
    sets the knob's start value; a switch on by default is turned off by ``--no-NAME``.
    ``rebuild``: the DataLoader is built again when the knob changes. ``batch_size`` takes its
    flag from ``parser(batch=...)``."""

    def __init__(
        self, name: str, default: Any, flag: str | None = None, rebuild: bool = False, **spec: Any
    ) -> None:
        dashed = "--" + name.replace("_", "-")
        self.name, self.default, self.rebuild, self.spec = name, default, rebuild, spec
        self.flag = flag or (f"--no-{dashed[2:]}" if default is True else dashed)
        self.inverted = self.flag != dashed  # the flag turns a switch off

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.name == "batch_size":
            return
        if isinstance(self.default, bool):
            action = "store_false" if self.inverted else "store_true"
            parser.add_argument(self.flag, dest=self.name, action=action, default=self.default)
        else:
            kind, choices = type(self.default), self.spec.get("choices")
            parser.add_argument(self.flag, dest=self.name, type=kind, default=self.default,
                                choices=choices)  # fmt: skip


def parser(
    doc: str | None, batch: int | tuple[int, int] | None = None, options: Iterable[Option] = ()
) -> argparse.ArgumentParser:
    """The options every scenario takes, and its own (``options``). ``batch`` adds
    ``--batch-size``: its default, or the ``--small`` and the full-size defaults."""
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
    if batch is not None:
        parser.set_defaults(batch_sizes=batch)
        parser.add_argument("--batch-size", type=int, default=None)
    for option in options:
        option.add_to(parser)
    return parser


class Knobs(dict):
    """The values a scenario's live knobs hold, by name; ``stale`` once a knob the DataLoader is
    built from changed (``batches`` then builds it again)."""

    stale = True

    @classmethod
    def of(
        cls,
        args: argparse.Namespace,
        options: Iterable[Option],
        model: torch.nn.Module | None = None,
        apply: dict[str, Callable[[Any], None]] | None = None,
        **values: Any,
    ) -> Knobs:
        """The knobs of ``options`` (docs/knobs.md) at the values parsed into ``args`` (or
        ``values``), each calling its ``apply`` entry on a change. The ``compile`` knob sets
        ``self["forward"]``: ``model``, compiled while it is on."""
        knobs, apply = cls(), dict(apply or {})

        def compiled(on: bool) -> None:
            knobs["forward"] = torch.compile(model) if on else model

        if model is not None:
            apply["compile"] = compiled
        for o in options:
            value = values.get(o.name, getattr(args, o.name, o.default))
            if o.name == "compile" and model is not None:
                compiled(value)
            knobs.declare(o, value, apply.get(o.name))
        return knobs

    def declare(self, option: Option, value: Any, apply: Callable[[Any], None] | None) -> None:
        self[option.name] = value

        def set_value(new: Any) -> None:
            self[option.name] = new
            self.stale = self.stale or option.rebuild
            if apply is not None:
                apply(new)

        if hook is not None:  # nothing without gputop-train
            hook.knob(option.name, value, set_value, **option.spec)


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


def steps(args: argparse.Namespace) -> Iterator[None]:
    """The training loop of a scenario without a DataLoader: once a step until ``--steps`` or
    ``--seconds``, the step counted when its body is done."""
    stop = Stop(args)
    while not stop.done:
        yield
        stop.step()


def batches(
    args: argparse.Namespace, knobs: Knobs, build: Callable[[], Iterable[T]]
) -> Iterator[T]:
    """The training loop over a DataLoader: its batches until ``--steps`` or ``--seconds``, the
    DataLoader built by ``build`` at the start and again whenever ``knobs`` went stale."""
    stop, loader = Stop(args), None
    while not stop.done:
        if knobs.stale or loader is None:
            knobs.stale = False
            loader = build()
        for batch in loader:
            yield batch
            if stop.step() or knobs.stale:
                break


def random_batches(
    args: argparse.Namespace, knobs: Knobs, shape: tuple[int, ...], classes: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The loop of a scenario whose batches are made on the device: ``knobs["batch_size"]``
    random samples of ``shape`` and their labels each step, until ``--steps`` or ``--seconds``."""
    for _ in steps(args):
        batch = knobs["batch_size"]
        x = torch.randn(batch, *shape, device=DEVICE)
        yield x, torch.randint(0, classes, (batch,), device=DEVICE)


def resnet18(small: bool, channels_last: bool = True) -> torch.nn.Module:
    """The image scenarios' ResNet-18 on the device (``tiny_cnn`` when ``small``)."""
    import torchvision

    model = tiny_cnn(1000) if small else torchvision.models.resnet18(num_classes=1000)
    layout = torch.channels_last if channels_last else torch.preserve_format
    return model.to(DEVICE, memory_format=layout)


def fit_images(
    args: argparse.Namespace,
    knobs: Knobs,
    build: Callable[[], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    prepare: Callable[[torch.Tensor], torch.Tensor] | None = None,
    bf16: Callable[[], bool] | bool = True,
    channels_last: bool = True,
) -> None:
    """The image scenarios' loop: each batch of the DataLoader ``build`` makes goes to the
    device (non-blocking unless the ``pin_memory`` knob is off), through ``prepare``, into a
    classifier step."""
    for images, labels in batches(args, knobs, build):
        pinned = knobs.get("pin_memory", True)
        images = images.to(DEVICE, non_blocking=pinned)
        labels = labels.to(DEVICE, non_blocking=pinned)
        if prepare is not None:
            images = prepare(images)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        classify(model, optimizer, images, labels, bf16=bf16() if callable(bf16) else bf16)


def loader(
    data: torch.utils.data.Dataset, batch: int, workers: int, pin: bool, shuffle: bool = False
) -> torch.utils.data.DataLoader:
    """A DataLoader as the image scenarios build it: persistent workers, whole batches."""
    return torch.utils.data.DataLoader(
        data,
        batch_size=batch,
        shuffle=shuffle,
        num_workers=workers,
        pin_memory=pin,
        persistent_workers=workers > 0,
        drop_last=True,
    )


def classify(
    model: Callable[[torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    bf16: bool,
    samples: bool = False,
) -> None:
    """One step of a classifier: bf16 autocast where asked, cross-entropy, backward, the
    optimizer's step; ``samples`` declares the step's samples (loops without a DataLoader)."""
    with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if samples:
        count_samples(len(inputs))
    optimizer.step()


def run(train: Callable[[argparse.Namespace], None], options: argparse.ArgumentParser) -> None:
    """Parse the options, then train, and exit 130 on Ctrl+C as a training script should."""
    args = options.parse_args()
    sizes = getattr(args, "batch_sizes", None)
    if sizes is not None:
        default = sizes if isinstance(sizes, int) else sizes[0 if args.small else 1]
        args.batch_size = args.batch_size or default
        del args.batch_sizes
    print(f"{os.path.basename(sys.argv[0])}: {vars(args)} on {DEVICE}", flush=True)
    try:
        train(args)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    print("done", flush=True)
