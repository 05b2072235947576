"""Heavy CPU augmentation on every core: one DataLoader worker per core, all of them busy,
and the GPU still waits.

FakeData -> RandomResizedCrop -> flip -> ColorJitter -> ToTensor -> Normalize in as many
workers as the machine has cores, feeding ResNet-18 in bf16 and channels_last (a GPU that
takes images faster than the CPU can augment them).

Fixes, as flags and as live knobs: --workers N (more workers than cores),
--input gpu (workers ship small uint8 images; the GPU resizes, flips, jitters, normalizes).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
import torchvision
from _scenario import CUDA, Knobs, Option, fit_images, loader, parser, resnet18, run
from torchvision import transforms

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
WORKERS = os.cpu_count() or 1
OPTIONS = (
    Option(
        "num_workers", WORKERS, "--workers", rebuild=True, minimum=0, maximum=256, role="workers"
    ),
    Option("input", "float", rebuild=True, choices=("float", "gpu"), role="input_format"),
)


def dataset(side: int, crop: int, input_format: str) -> torchvision.datasets.FakeData:
    if input_format == "gpu":  # the smallest images there are, as uint8
        return torchvision.datasets.FakeData(
            size=1_000_000, image_size=(3, side // 4, side // 4), transform=transforms.PILToTensor()
        )
    augment = transforms.Compose(
        [
            transforms.RandomResizedCrop(crop),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.4, 0.4, 0.4),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ]
    )
    return torchvision.datasets.FakeData(
        size=1_000_000, image_size=(3, side, side), transform=augment
    )


def augment_on_gpu(images: torch.Tensor, crop: int) -> torch.Tensor:
    """Resize, flip, brightness and contrast jitter and normalize a uint8 batch, on its device."""
    x = F.interpolate(images.float() / 255.0, size=(crop, crop), mode="bilinear")
    flip = torch.rand(len(x), 1, 1, 1, device=x.device) < 0.5
    x = torch.where(flip, x.flip(3), x)
    brightness = 1.0 + 0.8 * (torch.rand(len(x), 1, 1, 1, device=x.device) - 0.5)
    contrast = 1.0 + 0.8 * (torch.rand(len(x), 1, 1, 1, device=x.device) - 0.5)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = ((x * brightness - mean) * contrast + mean).clamp(0.0, 1.0)
    mean_c = torch.tensor(MEAN, device=x.device).view(1, 3, 1, 1)
    std_c = torch.tensor(STD, device=x.device).view(1, 3, 1, 1)
    return (x - mean_c) / std_c


def train(args: argparse.Namespace) -> None:
    side, crop = (128, 112) if args.small else (256, 224)
    model = resnet18(args.small)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    config = Knobs.of(args, OPTIONS)

    def build() -> torch.utils.data.DataLoader:
        data = dataset(side, crop, config["input"])
        return loader(data, args.batch_size, config["num_workers"], CUDA)

    def prepare(images: torch.Tensor) -> torch.Tensor:
        return augment_on_gpu(images, crop) if config["input"] == "gpu" else images

    fit_images(args, config, build, model, optimizer, prepare)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(16, 256), options=OPTIONS))
