"""Big float32 batches of cached, preprocessed images: the workers have them ready at once,
but the training process must unpack and pin 150 MiB per batch, and it is the limit.

8 workers serve 224x224 float32 images from memory (a cache of preprocessed tensors), batch
256, pin_memory=True, into a small convolutional network in bf16: the GPU and the workers
could go faster than the training process's pinning thread copies the batches.

Fixes, as flags and as live knobs: --input uint8 (cache uint8 images, normalize on the GPU:
a quarter of the bytes to pin), --workers N, --no-pin-memory.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import CUDA, DEVICE, CachedImages, Stop, knob, parser, run
from torch.utils.data import DataLoader


def small_convnet() -> torch.nn.Module:
    def block(cin: int, cout: int) -> list[torch.nn.Module]:
        return [torch.nn.Conv2d(cin, cout, 3, stride=2, padding=1), torch.nn.BatchNorm2d(cout)]

    return torch.nn.Sequential(
        *block(3, 32),
        torch.nn.ReLU(),
        *block(32, 64),
        torch.nn.ReLU(),
        *block(64, 128),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 1000),
    )


def train(args: argparse.Namespace) -> None:
    config = {"workers": args.workers, "input": args.input, "pin": args.pin_memory and CUDA}
    stale = {"loader": True}
    side = 64 if args.small else 224
    datasets = {
        "float": CachedImages(side, torch.float32),
        "uint8": CachedImages(side, torch.uint8),
    }
    model = small_convnet().to(DEVICE, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def setter(key: str) -> object:
        def apply(value: object) -> None:
            config[key], stale["loader"] = value, True

        return apply

    knob("num_workers", args.workers, setter("workers"), minimum=0, maximum=64, role="workers")
    knob("input", args.input, setter("input"), choices=("float", "uint8"), role="input_format")
    knob("pin_memory", config["pin"], setter("pin"), role="pin_memory")
    stop, loader = Stop(args), None
    while not stop.done:
        if stale["loader"]:
            stale["loader"] = False
            loader = DataLoader(
                datasets[config["input"]],
                batch_size=args.batch_size,
                shuffle=True,
                num_workers=config["workers"],
                pin_memory=config["pin"],
                persistent_workers=config["workers"] > 0,
                drop_last=True,
            )
        for images, labels in loader:
            images = images.to(DEVICE, non_blocking=config["pin"])
            labels = labels.to(DEVICE, non_blocking=config["pin"])
            if config["input"] == "uint8":
                images = images.float() / 127.5 - 1.0
            images = images.contiguous(memory_format=torch.channels_last)
            with torch.autocast(DEVICE, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if stop.step() or stale["loader"]:
                break


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--workers", type=int, default=8)
    options.add_argument("--input", choices=("float", "uint8"), default="float")
    options.add_argument("--no-pin-memory", dest="pin_memory", action="store_false")
    options.add_argument("--batch-size", type=int, default=None)
    arguments = options.parse_args()
    arguments.batch_size = arguments.batch_size or (64 if arguments.small else 256)
    run(train, arguments)
