"""A segmentation loss written with data-dependent ops: every nonzero, unique and boolean mask
makes the CPU wait for the GPU, several times a step (the playbook's third part).

A small encoder-decoder on 128x128 images (already on the GPU) with per-pixel labels in 21
classes and an "ignore" label (255), batch 32, Adam, bf16: the loss first drops ignored pixels
with a boolean mask, counts the classes present with torch.unique, and picks valid pixels with
nonzero.

Fixes, as flags and as live knobs: --sync-free-loss (CrossEntropyLoss(ignore_index=255),
fixed shapes), --batch-size N.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _scenario import DEVICE, Knobs, Option, count_samples, parser, run, steps

IGNORE = 255
CLASSES = 21
OPTIONS = (
    Option("sync_loss", True, "--sync-free-loss", role="syncs", help="the loss with syncs"),
    Option("batch_size", None, minimum=1, maximum=1024, role="batch_size"),
)


def segmenter(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(2 * width, width, 2, stride=2),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(width, CLASSES, 2, stride=2),
    )


def loss_with_syncs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """As first written: readable, and three host-device syncs."""
    logits = logits.permute(0, 2, 3, 1).reshape(-1, CLASSES)
    labels = labels.reshape(-1)
    valid = labels != IGNORE
    logits, labels = logits[valid], labels[valid]  # sync: boolean-mask indexing
    present = torch.unique(labels)  # sync: its size depends on the data
    keep = torch.nonzero(labels < CLASSES).squeeze(1)  # sync: nonzero
    loss = F.cross_entropy(logits[keep], labels[keep])
    return loss + 0.0 * present.numel()


def loss_without_syncs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels, ignore_index=IGNORE)


def train(args: argparse.Namespace) -> None:
    side = 64 if args.small else 128
    model = segmenter(16 if args.small else 64).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    knobs = Knobs.of(args, OPTIONS)
    for _ in steps(args):
        batch = knobs["batch_size"]
        images = torch.randn(batch, 3, side, side, device=DEVICE)
        labels = torch.randint(0, CLASSES, (batch, side, side), device=DEVICE)
        labels[:, : side // 8] = IGNORE  # a border nobody labelled
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            logits = model(images)
        loss = (loss_with_syncs if knobs["sync_loss"] else loss_without_syncs)(
            logits.float(), labels
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        count_samples(batch)
        optimizer.step()


if __name__ == "__main__":
    run(train, parser(__doc__, batch=32, options=OPTIONS))
