"""ImageNet-style training whose input pipeline runs on fewer workers than the machine has
cores: the step waits for data while most cores idle.

torchvision FakeData (random PIL images) -> RandomResizedCrop -> flip -> ToTensor ->
Normalize in 4 DataLoader workers, ResNet-18, batch 256, SGD with momentum, fp32: the shape of
PyTorch's ImageNet example, on a 16-core box.

Fixes, as flags and as live knobs: --workers N (num_workers), --input uint8 (PILToTensor,
normalize on the GPU), --precision bf16.
"""

from __future__ import annotations

import argparse

import torch
import torchvision
from _scenario import CUDA, DEVICE, Knobs, Option, fit_images, loader, parser, resnet18, run
from torchvision import transforms

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# fmt: off
OPTIONS = (
    Option("num_workers", 4, "--workers", rebuild=True, minimum=0, maximum=64, role="workers",
           help="DataLoader worker processes"),
    Option("input", "float", rebuild=True, choices=("float", "uint8"), role="input_format",
           help="float32 built on the CPU, or uint8"),
    Option("precision", "fp32", choices=("fp32", "bf16"), role="precision", help="autocast dtype"),
)
# fmt: on


def dataset(side: int, crop: int, input_format: str) -> torchvision.datasets.FakeData:
    ops: list = [transforms.RandomResizedCrop(crop), transforms.RandomHorizontalFlip()]
    if input_format == "float":
        ops += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    else:  # uint8: a quarter of the bytes; the GPU converts and normalizes
        ops += [transforms.PILToTensor()]
    return torchvision.datasets.FakeData(
        size=1_000_000, image_size=(3, side, side), transform=transforms.Compose(ops)
    )


def train(args: argparse.Namespace) -> None:
    side, crop = (128, 112) if args.small else (256, 224)
    model = resnet18(args.small, channels_last=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    mean = torch.tensor(MEAN, device=DEVICE).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=DEVICE).view(1, 3, 1, 1) * 255
    config = Knobs.of(args, OPTIONS)

    def build() -> torch.utils.data.DataLoader:
        return loader(dataset(side, crop, config["input"]), args.batch_size,
                      config["num_workers"], CUDA, shuffle=True)  # fmt: skip

    def prepare(images: torch.Tensor) -> torch.Tensor:
        return (images.float() - mean) / std if config["input"] == "uint8" else images

    fit_images(args, config, build, model, optimizer, prepare,
               bf16=lambda: config["precision"] == "bf16", channels_last=False)  # fmt: skip


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(16, 256), options=OPTIONS))
