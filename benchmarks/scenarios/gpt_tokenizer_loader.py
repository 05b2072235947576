"""Tokenizing in the DataLoader: each sample is raw text, split by a GPT-2-style regex
pre-tokenizer and looked up in a vocabulary, in Python, inside ``__getitem__``, with the
DataLoader's default ``num_workers=0``: the training process tokenizes while the GPU waits.

A 6-layer GPT (width 512, block 1024) in bf16 with scaled_dot_product_attention, batch 16.

Fixes, as flags and as live knobs: --workers N, --compile.
"""

from __future__ import annotations

import argparse
import random
import re

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, batches, parser, run
from torch.utils.data import DataLoader, Dataset

OPTIONS = (
    Option("num_workers", 0, "--workers", rebuild=True, minimum=0, maximum=64, role="workers"),
    Option("compile", False, role="compile"),
)

# GPT-2's pre-tokenizer pattern, without the Unicode classes of the regex package.
PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+""")


class TextDataset(Dataset):
    """Documents of random words; tokenized on every access, as a raw-text pipeline does."""

    def __init__(self, vocab: int, block: int) -> None:
        rng = random.Random(0)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(vocab // 2)]
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.ids.update({f" {w}": i + len(self.words) for i, w in enumerate(self.words)})
        self.block, self.vocab = block, vocab

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rng = random.Random(index)
        text = " ".join(
            rng.choice(self.words) + rng.choice(("", ",", ".")) for _ in range(self.block + 1)
        )
        ids = [self.ids.get(piece, self.vocab - 1) for piece in PRETOKENIZE.findall(text)]
        ids = torch.tensor(ids[: self.block + 1], dtype=torch.long)
        return {"input_ids": ids[:-1], "labels": ids[1:]}


def train(args: argparse.Namespace) -> None:
    cfg = config(args.small, layers=6, width=512, heads=8)
    model = GPT(cfg).to(DEVICE)
    optimizer = make_optimizer(model, "fused" if CUDA else "foreach")
    dataset = TextDataset(cfg.vocab, cfg.block)
    state = Knobs.of(args, OPTIONS, model)

    def build() -> DataLoader:
        workers = state["num_workers"]
        return DataLoader(dataset, batch_size=args.batch_size, num_workers=workers,
                          pin_memory=CUDA, persistent_workers=workers > 0)  # fmt: skip

    for batch in batches(args, state, build):
        ids = batch["input_ids"].to(DEVICE, non_blocking=True)
        labels = batch["labels"].to(DEVICE, non_blocking=True)
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = state["forward"](ids, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    run(train, parser(__doc__, batch=16, options=OPTIONS))
