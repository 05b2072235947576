"""ResNet-50 trained in fp32 on a GPU with bf16 tensor cores: the GPU is busy, with TF32
convolutions, and half its speed is left on the table.

A synthetic batch already on the GPU (no input pipeline at all: the loop declares its samples
with count_samples), batch 128, SGD: cuDNN runs the fp32 convolutions as TF32 by default,
which lifts GPM tensor activity a little, but this is not mixed precision.

Fixes, as flags and as live knobs: --precision bf16, --channels-last, --batch-size N.
"""

from __future__ import annotations

import argparse

import torch
import torchvision
from _scenario import DEVICE, Knobs, Option, classify, parser, random_batches, run

OPTIONS = (
    Option("precision", "fp32", choices=("fp32", "bf16"), role="precision"),
    Option("channels_last", False, role="channels_last"),
    Option("batch_size", None, minimum=1, maximum=2048, role="batch_size"),
)


def train(args: argparse.Namespace) -> None:
    side = 64 if args.small else 224
    model = torchvision.models.resnet18() if args.small else torchvision.models.resnet50()
    model = model.to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    layout = {"format": torch.contiguous_format}

    def set_channels_last(value: bool) -> None:
        layout["format"] = torch.channels_last if value else torch.contiguous_format
        model.to(memory_format=layout["format"])

    knobs = Knobs.of(args, OPTIONS, apply={"channels_last": set_channels_last})
    if args.channels_last:
        set_channels_last(True)
    for images, labels in random_batches(args, knobs, (3, side, side), 1000):
        images = images.contiguous(memory_format=layout["format"])
        bf16 = knobs["precision"] == "bf16"
        classify(model, optimizer, images, labels, bf16=bf16, samples=True)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=(4, 128), options=OPTIONS))
