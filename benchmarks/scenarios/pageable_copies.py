"""Batches copied to the GPU from pageable memory: every copy blocks the training thread.

8 workers serve 224x224 float32 images from memory (preprocessed, cached), batch 64, the
DataLoader's default pin_memory=False and a plain .to("cuda"), into ResNet-18 in bf16 and
channels_last: the playbook's rung 1, with the GPU's own work made fast.

Fixes, as flags and as live knobs: --pin-memory (pinned batches, non_blocking copies),
--workers N, --batch-size N.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torchvision
from _scenario import CUDA, DEVICE, CachedImages, Stop, knob, parser, run, tiny_cnn
from torch.utils.data import DataLoader


def train(args: argparse.Namespace) -> None:
    config = {"workers": args.workers, "pin": args.pin_memory and CUDA, "batch": args.batch_size}
    stale = {"loader": True}
    data = CachedImages(64 if args.small else 224, torch.float32)
    model = tiny_cnn(1000) if args.small else torchvision.models.resnet18(num_classes=1000)
    model = model.to(DEVICE, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def setter(key: str) -> object:
        def apply(value: object) -> None:
            config[key], stale["loader"] = value, True

        return apply

    knob("pin_memory", config["pin"], setter("pin"), role="pin_memory")
    knob("num_workers", args.workers, setter("workers"), minimum=0, maximum=64, role="workers")
    knob("batch_size", args.batch_size, setter("batch"), minimum=1, maximum=4096, role="batch_size")
    stop, loader = Stop(args), None
    while not stop.done:
        if stale["loader"]:
            stale["loader"] = False
            loader = DataLoader(
                data,
                batch_size=config["batch"],
                shuffle=True,
                num_workers=config["workers"],
                pin_memory=config["pin"],
                persistent_workers=config["workers"] > 0,
                drop_last=True,
            )
        for images, labels in loader:
            images = images.to(DEVICE, non_blocking=config["pin"])
            labels = labels.to(DEVICE, non_blocking=config["pin"])
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
    options.add_argument("--pin-memory", action="store_true")
    options.add_argument("--batch-size", type=int, default=64)
    run(train, options.parse_args())
