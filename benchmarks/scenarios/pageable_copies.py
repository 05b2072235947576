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
import torchvision
from _scenario import (
    CUDA,
    DEVICE,
    CachedImages,
    Knobs,
    batches,
    classify,
    loader,
    parser,
    run,
    tiny_cnn,
)


def train(args: argparse.Namespace) -> None:
    data = CachedImages(64 if args.small else 224, torch.float32)
    model = tiny_cnn(1000) if args.small else torchvision.models.resnet18(num_classes=1000)
    model = model.to(DEVICE, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    config = Knobs()
    config.declare("pin_memory", args.pin_memory and CUDA, rebuild=True, role="pin_memory")
    config.declare("num_workers", args.workers, rebuild=True, minimum=0, maximum=64,
                   role="workers")  # fmt: skip
    config.declare("batch_size", args.batch_size, rebuild=True, minimum=1, maximum=4096,
                   role="batch_size")  # fmt: skip

    def build() -> torch.utils.data.DataLoader:
        return loader(data, config["batch_size"], config["num_workers"], config["pin_memory"],
                      shuffle=True)  # fmt: skip

    for images, labels in batches(args, config, build):
        images = images.to(DEVICE, non_blocking=config["pin_memory"])
        labels = labels.to(DEVICE, non_blocking=config["pin_memory"])
        images = images.contiguous(memory_format=torch.channels_last)
        classify(model, optimizer, images, labels, bf16=True)


if __name__ == "__main__":
    options = parser(__doc__, batch=64)
    options.add_argument("--workers", type=int, default=8)
    options.add_argument("--pin-memory", action="store_true")
    run(train, options)
