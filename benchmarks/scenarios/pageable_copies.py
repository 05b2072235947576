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
from _scenario import CUDA, CachedImages, Knobs, Option, fit_images, loader, parser, resnet18, run

OPTIONS = (
    Option("pin_memory", False, rebuild=True, role="pin_memory"),
    Option("num_workers", 8, "--workers", rebuild=True, minimum=0, maximum=64, role="workers"),
    Option("batch_size", None, rebuild=True, minimum=1, maximum=4096, role="batch_size"),
)


def train(args: argparse.Namespace) -> None:
    data = CachedImages(64 if args.small else 224, torch.float32)
    model = resnet18(args.small)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    config = Knobs.of(args, OPTIONS, pin_memory=args.pin_memory and CUDA)

    def build() -> torch.utils.data.DataLoader:
        return loader(data, config["batch_size"], config["num_workers"], config["pin_memory"],
                      shuffle=True)  # fmt: skip

    fit_images(args, config, build, model, optimizer)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=64, options=OPTIONS))
