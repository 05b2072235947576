"""A Hugging Face ``Trainer`` run in fp32, the way its examples write one: GPT-2 small from
its config (no download), random tokens as the dataset, default TrainingArguments. It declares
no gputop-train knob. ``--bf16`` and ``--tf32`` are the Trainer's own switches for the fixes.

    python hf_trainer_style.py                     # fp32
    python hf_trainer_style.py --bf16              # a fix in its own flags
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

parser = argparse.ArgumentParser()
parser.add_argument("--bf16", action="store_true")
parser.add_argument("--tf32", action="store_true")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--seq-len", type=int, default=512)
parser.add_argument("--max-seconds", type=float, default=0.0)


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, size: int, seq_len: int, vocab: int) -> None:
        self.size, self.seq_len, self.vocab = size, seq_len, vocab

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, self.vocab, (self.seq_len,))
        return {"input_ids": ids, "labels": ids}


class Meter(TrainerCallback):
    """The script's own throughput meter, as a user adds one: tokens a second over each
    logging window (``logging_steps``), printed with the step it ends at."""

    def __init__(self, tokens_per_step: int) -> None:
        self.tokens_per_step = tokens_per_step
        self.last: tuple[float, int] | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        now = time.time()
        if self.last is not None and state.global_step > self.last[1]:
            steps, seconds = state.global_step - self.last[1], now - self.last[0]
            rate = steps * self.tokens_per_step / seconds
            print(f"meter step {state.global_step} tokens/s {rate:.0f}", flush=True)
        self.last = (now, state.global_step)


class StopAfter(TrainerCallback):
    def __init__(self, seconds: float) -> None:
        self.seconds, self.started = seconds, time.time()

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if self.seconds and time.time() - self.started > self.seconds:
            control.should_training_stop = True


def main() -> None:
    args = parser.parse_args()
    config = GPT2Config(n_positions=1024)
    model = GPT2LMHeadModel(config)
    dataset = RandomTokens(1_000_000, args.seq_len, config.vocab_size)
    training_args = TrainingArguments(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=args.batch_size,
        max_steps=1_000_000,
        logging_steps=50,
        save_strategy="no",
        report_to=[],
        bf16=args.bf16,
        tf32=args.tf32 or None,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        callbacks=[StopAfter(args.max_seconds), Meter(args.batch_size * args.seq_len)],
    )
    trainer.train()


if __name__ == "__main__":
    main()
