"""A loop in the style of the Hugging Face Trainer: a DataLoader of token dicts, bf16, gradient
clipping, a learning-rate schedule, and the Trainer's NaN/inf filter on the loss of every step
(``logging_nan_inf_filter``, on by default: ``if torch.isnan(tr_loss_step) or
torch.isinf(tr_loss_step)`` reads the loss on the host, a sync per step).

A 6-layer GPT (width 512, block 512), batch 16 from 2 workers with pinned memory.

Fixes, as flags and as live knobs: --no-nan-inf-filter (the sync), --batch-size N.
"""

from __future__ import annotations

import argparse

import torch
from _gpt import GPT, config, make_optimizer
from _scenario import CUDA, DEVICE, Knobs, Option, Stop, parser, run
from torch.utils.data import DataLoader, Dataset

OPTIONS = (
    Option("nan_inf_filter", True, role="syncs"),
    Option("batch_size", None, minimum=1, maximum=1024, role="batch_size"),
)


class TokenDataset(Dataset):
    def __init__(self, vocab: int, block: int) -> None:
        self.tokens = torch.randint(0, vocab, (1 << 20,))
        self.block = block

    def __len__(self) -> int:
        return len(self.tokens) // self.block - 1

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = self.tokens[index * self.block : (index + 1) * self.block + 1]
        return {"input_ids": ids[:-1], "labels": ids[1:]}


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        cfg = config(args.small, layers=6, width=512, heads=8, block=512)
        self.model = GPT(cfg).to(DEVICE)
        self.optimizer = make_optimizer(self.model, "fused" if CUDA else "foreach")
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / 100)
        )
        self.dataset = TokenDataset(cfg.vocab, cfg.block)
        self.batch_size, self.nan_inf_filter = args.batch_size, args.nan_inf_filter
        self.rebuild = True
        self.global_step = 0

    def loader(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=self.batch_size, shuffle=True,
                          num_workers=2, pin_memory=CUDA, drop_last=True)  # fmt: skip

    def training_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: v.to(DEVICE, non_blocking=True) for k, v in batch.items()}
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=CUDA):
            loss = self.model(inputs["input_ids"], inputs["labels"])
        loss.backward()
        return loss.detach()

    def train(self, stop: Stop) -> None:
        tr_loss = torch.zeros((), device=DEVICE)
        while not stop.done:
            self.rebuild = False
            for batch in self.loader():
                tr_loss_step = self.training_step(batch)
                if self.nan_inf_filter and (torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)):
                    tr_loss = tr_loss + tr_loss / (1 + self.global_step)
                else:
                    tr_loss = tr_loss + tr_loss_step
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.global_step += 1
                if self.global_step % 100 == 0:
                    print(f"step {self.global_step} loss {tr_loss.item() / 100:.4f}", flush=True)
                    tr_loss.zero_()
                if stop.step() or self.rebuild:
                    break


def train(args: argparse.Namespace) -> None:
    trainer = Trainer(args)

    def set_filter(value: bool) -> None:
        trainer.nan_inf_filter = value

    def set_batch(value: int) -> None:
        trainer.batch_size, trainer.rebuild = value, True

    Knobs.of(args, OPTIONS, apply={"nan_inf_filter": set_filter, "batch_size": set_batch})
    trainer.train(Stop(args))


if __name__ == "__main__":
    run(train, parser(__doc__, batch=16, options=OPTIONS))
