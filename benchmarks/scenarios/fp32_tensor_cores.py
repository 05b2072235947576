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
from _scenario import DEVICE, Knobs, classify, parser, run, steps


def train(args: argparse.Namespace) -> None:
    side = 64 if args.small else 224
    model = torchvision.models.resnet18() if args.small else torchvision.models.resnet50()
    model = model.to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    layout = {"format": torch.contiguous_format}

    def set_channels_last(value: bool) -> None:
        layout["format"] = torch.channels_last if value else torch.contiguous_format
        model.to(memory_format=layout["format"])

    knobs = Knobs()
    knobs.declare("precision", args.precision, choices=("fp32", "bf16"), role="precision")
    knobs.declare("channels_last", args.channels_last, apply=set_channels_last,
                  role="channels_last")  # fmt: skip
    knobs.declare("batch_size", args.batch_size, minimum=1, maximum=2048, role="batch_size")
    if args.channels_last:
        set_channels_last(True)
    for _ in steps(args):
        batch = knobs["batch_size"]
        images = torch.randn(batch, 3, side, side, device=DEVICE)
        labels = torch.randint(0, 1000, (batch,), device=DEVICE)
        images = images.contiguous(memory_format=layout["format"])
        bf16 = knobs["precision"] == "bf16"
        classify(model, optimizer, images, labels, bf16=bf16, samples=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=(4, 128))
    options.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    options.add_argument("--channels-last", action="store_true")
    run(train, options)
