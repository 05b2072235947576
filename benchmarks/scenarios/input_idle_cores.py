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
import torch.nn.functional as F
import torchvision
from _scenario import CUDA, DEVICE, Stop, knob, parser, run, tiny_cnn
from torch.utils.data import DataLoader
from torchvision import transforms

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


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
    config = {"workers": args.workers, "input": args.input, "precision": args.precision}
    stale = {"loader": True}
    side, crop = (128, 112) if args.small else (256, 224)
    model = tiny_cnn(1000) if args.small else torchvision.models.resnet18(num_classes=1000)
    model = model.to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    mean = torch.tensor(MEAN, device=DEVICE).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=DEVICE).view(1, 3, 1, 1) * 255

    def setter(key: str, rebuild: bool) -> object:
        def apply(value: object) -> None:
            config[key] = value
            stale["loader"] = stale["loader"] or rebuild

        return apply

    knob(
        "num_workers",
        args.workers,
        setter("workers", True),
        minimum=0,
        maximum=64,
        role="workers",
        help="DataLoader worker processes",
    )
    knob(
        "input",
        args.input,
        setter("input", True),
        choices=("float", "uint8"),
        role="input_format",
        help="float32 built on the CPU, or uint8",
    )
    knob(
        "precision",
        args.precision,
        setter("precision", False),
        choices=("fp32", "bf16"),
        role="precision",
        help="autocast dtype",
    )
    stop, loader = Stop(args), None
    while not stop.done:
        if stale["loader"]:
            stale["loader"] = False
            loader = DataLoader(
                dataset(side, crop, config["input"]),
                batch_size=args.batch_size,
                shuffle=True,
                num_workers=config["workers"],
                pin_memory=CUDA,
                persistent_workers=config["workers"] > 0,
                drop_last=True,
            )
        for images, labels in loader:
            images = images.to(DEVICE, non_blocking=True)
            labels = labels.to(DEVICE, non_blocking=True)
            if config["input"] == "uint8":
                images = (images.float() - mean) / std
            bf16 = config["precision"] == "bf16"
            with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if stop.step() or stale["loader"]:
                break


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--workers", type=int, default=4)
    options.add_argument("--input", choices=("float", "uint8"), default="float")
    options.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    options.add_argument("--batch-size", type=int, default=None)
    arguments = options.parse_args()
    arguments.batch_size = arguments.batch_size or (16 if arguments.small else 256)
    run(train, arguments)
