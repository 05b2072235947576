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
from _scenario import CUDA, DEVICE, CachedImages, Knobs, Option, fit_images, loader, parser, run

OPTIONS = (
    Option("num_workers", 8, "--workers", rebuild=True, minimum=0, maximum=64, role="workers"),
    Option("input", "float", rebuild=True, choices=("float", "uint8"), role="input_format"),
    Option("pin_memory", True, rebuild=True, role="pin_memory"),
)


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
    side = 64 if args.small else 224
    datasets = {
        "float": CachedImages(side, torch.float32),
        "uint8": CachedImages(side, torch.uint8),
    }
    model = small_convnet().to(DEVICE, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    config = Knobs.of(args, OPTIONS, pin_memory=args.pin_memory and CUDA)

    def build() -> torch.utils.data.DataLoader:
        return loader(datasets[config["input"]], args.batch_size, config["num_workers"],
                      config["pin_memory"], shuffle=True)  # fmt: skip

    def prepare(images: torch.Tensor) -> torch.Tensor:
        return images.float() / 127.5 - 1.0 if config["input"] == "uint8" else images

    fit_images(args, config, build, model, optimizer, prepare)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(64, 256), options=OPTIONS))
