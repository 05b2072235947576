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
import torch.nn.functional as F
import torchvision
from _scenario import DEVICE, Stop, count_samples, knob, parser, run


def train(args: argparse.Namespace) -> None:
    config = {"precision": args.precision, "batch": args.batch_size}
    side = 64 if args.small else 224
    model = torchvision.models.resnet18() if args.small else torchvision.models.resnet50()
    model = model.to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    layout = {"format": torch.contiguous_format}

    def set_precision(value: str) -> None:
        config["precision"] = value

    def set_channels_last(value: bool) -> None:
        layout["format"] = torch.channels_last if value else torch.contiguous_format
        model.to(memory_format=layout["format"])

    def set_batch(value: int) -> None:
        config["batch"] = value

    knob("precision", args.precision, set_precision, choices=("fp32", "bf16"), role="precision")
    knob("channels_last", args.channels_last, set_channels_last, role="channels_last")
    knob("batch_size", args.batch_size, set_batch, minimum=1, maximum=2048, role="batch_size")
    if args.channels_last:
        set_channels_last(True)
    stop = Stop(args)
    while not stop.done:
        batch = config["batch"]
        images = torch.randn(batch, 3, side, side, device=DEVICE)
        labels = torch.randint(0, 1000, (batch,), device=DEVICE)
        images = images.contiguous(memory_format=layout["format"])
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=config["precision"] == "bf16"):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        count_samples(batch)
        optimizer.step()
        stop.step()


if __name__ == "__main__":
    options = parser(__doc__)
    options.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    options.add_argument("--channels-last", action="store_true")
    options.add_argument("--batch-size", type=int, default=None)
    arguments = options.parse_args()
    arguments.batch_size = arguments.batch_size or (4 if arguments.small else 128)
    run(train, arguments)
