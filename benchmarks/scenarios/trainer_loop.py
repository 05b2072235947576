"""A hand-written trainer in the style of Lightning or the Hugging Face Trainer: callbacks,
a learning-rate schedule, gradient clipping, a log line every 50 steps and a validation pass
every 200, around a Transformer encoder trained in fp32.

Token sequences (length 256, vocabulary 30,000) made by 4 DataLoader workers, batch 32, a
6-layer Transformer encoder (d_model 512), AdamW with linear warm-up. The validation pass
iterates its own DataLoader between two training steps: its batches are not training data.

Fixes, as flags and as live knobs: --precision bf16, --workers N.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _scenario import CUDA, DEVICE, Knobs, Option, Stop, parser, run
from torch.utils.data import DataLoader, Dataset

VOCAB = 30_000
OPTIONS = (
    Option("precision", "fp32", choices=("fp32", "bf16"), role="precision"),
    Option("num_workers", 4, "--workers", minimum=0, maximum=64, role="workers"),
)


class RandomTokens(Dataset):
    def __init__(self, length: int, sequence: int) -> None:
        self.length, self.sequence = length, sequence

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(index)
        tokens = torch.randint(0, VOCAB, (self.sequence,), generator=generator)
        return {"input_ids": tokens, "labels": tokens.roll(-1)}


class Classifier(torch.nn.Module):
    def __init__(self, d_model: int, layers: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, 8, 4 * d_model, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, VOCAB)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(input_ids)))


class Trainer:
    """fit() runs the loop; callbacks see every step (logging, validation, schedules)."""

    def __init__(self, model: torch.nn.Module, args: argparse.Namespace) -> None:
        self.model, self.args = model, args
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / 500)
        )
        self.precision, self.workers = args.precision, args.num_workers
        self.callbacks: list[Callable[[Trainer, int, torch.Tensor], None]] = []
        self.rebuild_loader = True
        self.global_step = 0

    def loader(self, dataset: Dataset, workers: int) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.args.batch_size,
            shuffle=True,
            num_workers=workers,
            pin_memory=CUDA,
            persistent_workers=workers > 0,
            drop_last=True,
        )

    def training_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        ids = batch["input_ids"].to(DEVICE, non_blocking=True)
        labels = batch["labels"].to(DEVICE, non_blocking=True)
        bf16 = self.precision == "bf16"
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=bf16):
            logits = self.model(ids)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

    def fit(self, train_set: Dataset, stop: Stop) -> None:
        loader = None
        while not stop.done:
            if self.rebuild_loader:
                self.rebuild_loader = False
                loader = self.loader(train_set, self.workers)
            self.model.train()
            for batch in loader:
                loss = self.training_step(batch)
                self.global_step += 1
                for callback in self.callbacks:
                    callback(self, self.global_step, loss)
                if stop.step() or self.rebuild_loader:
                    break


def log_every(steps: int) -> Callable[[Trainer, int, torch.Tensor], None]:
    def log(trainer: Trainer, step: int, loss: torch.Tensor) -> None:
        if step % steps == 0:
            lr = trainer.scheduler.get_last_lr()[0]
            print(f"step {step} loss {loss.item():.3f} lr {lr:.2e}", flush=True)

    return log


def validate_every(steps: int, val_set: Dataset) -> Callable[[Trainer, int, torch.Tensor], None]:
    def validate(trainer: Trainer, step: int, loss: torch.Tensor) -> None:
        if step % steps:
            return
        trainer.model.eval()
        total = torch.zeros((), device=DEVICE)
        with torch.no_grad():
            for batch in trainer.loader(val_set, 2):
                logits = trainer.model(batch["input_ids"].to(DEVICE))
                total += F.cross_entropy(
                    logits.reshape(-1, VOCAB), batch["labels"].to(DEVICE).reshape(-1)
                )
        print(f"step {step} validation loss {total.item():.3f}", flush=True)
        trainer.model.train()

    return validate


def train(args: argparse.Namespace) -> None:
    d_model, layers, sequence = (64, 2, 32) if args.small else (512, 6, 256)
    trainer = Trainer(Classifier(d_model, layers).to(DEVICE), args)
    trainer.callbacks += [
        log_every(50),
        validate_every(200, RandomTokens(20 * args.batch_size, sequence)),
    ]

    def set_precision(value: str) -> None:
        trainer.precision = value

    def set_workers(value: int) -> None:
        trainer.workers, trainer.rebuild_loader = value, True

    Knobs.of(args, OPTIONS, apply={"precision": set_precision, "num_workers": set_workers})
    trainer.fit(RandomTokens(10_000_000, sequence), Stop(args))


if __name__ == "__main__":
    run(train, parser(__doc__, batch=32, options=OPTIONS))
