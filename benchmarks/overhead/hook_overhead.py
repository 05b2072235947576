"""Hook overhead: step time with and without the hook, interleaved in one process.

Blocks of steps alternate (ABBA) between "hook installed" and "hook removed" (``uninstall``)
so both sides see the same machine state, clocks and thermals; a monitor process reads the
hook's socket throughout, as in real use. Each block's median step time comes from the
loop's own clock, never from the hook. The ratio of medians over all blocks is reported, and
the same for each block's mean step time: a median cannot see a stall of one step in
hundreds (the hook's thread holding the GIL twice a second), a mean can.

    python -m benchmarks.overhead.hook_overhead tiny            # ~2 ms/step MLP loop (GPU, or CPU)
    python -m benchmarks.overhead.hook_overhead gpt       # nanoGPT-style, no DataLoader (fast)
    python -m benchmarks.overhead.hook_overhead resnet-rung8    # the demo at rung 8 (GPU)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.common.abba import abba_rounds
from benchmarks.common.paths import REPO
from benchmarks.common.provenance import write_result
from benchmarks.common.reader import start_reader
from gputop_train.hook import patches


class _WholeBatches(torch.utils.data.Dataset):
    """Serves ready-made batches, so the DataLoader costs microseconds, not a collate."""

    def __init__(self, batches: int, batch: int, width: int) -> None:
        self.x = (
            torch.randn(batches, batch, width).pin_memory()
            if torch.cuda.is_available()
            else torch.randn(batches, batch, width)
        )
        self.y = torch.randint(0, 10, (batches, batch))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


def tiny_workload(device: str) -> Callable[[], None]:
    """A two-layer MLP step of ~2 ms on an H100 (fp32), fed by a DataLoader."""
    width = 4096 if device == "cuda" else 256
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(_WholeBatches(16, 1024, width), batch_size=None)
    iterator = iter(loader)

    def step() -> None:
        nonlocal iterator
        try:
            x, y = next(iterator)
        except StopIteration:
            iterator = iter(loader)
            x, y = next(iterator)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def gpt_workload(device: str) -> Callable[[], None]:
    """A nanoGPT-style step without a DataLoader: random windows of one token array (its
    memmap get_batch), a small causal LM, AdamW; fast, so the hook's forward, backward and
    optimizer marks weigh as much as they ever will."""
    vocab, width, block, batch = 512, 256 if device == "cuda" else 64, 64, 16
    tokens = torch.randint(0, vocab, (1_000_000,))
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, width), torch.nn.Linear(width, width), torch.nn.GELU()
    ).to(device)
    head = torch.nn.Linear(width, vocab).to(device)
    model.append(head)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(tokens) - block - 1, (batch,))
        x = torch.stack([tokens[i : i + block] for i in starts])
        y = torch.stack([tokens[i + 1 : i + 1 + block] for i in starts])
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    def step() -> None:
        x, y = get_batch()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def resnet_rung8_workload(device: str) -> Callable[[], None]:
    sys.path.insert(0, str(REPO / "demos"))
    import resnet

    rung8 = "--workers 4 --pin-memory --batch-size 1024 --input gpu-resize --precision bf16"
    config, _, _ = resnet.parse_args(
        [*rung8.split(), "--channels-last", "--compile", "--device", device]
    )
    trainer = resnet.Trainer(config)
    iterator = iter(trainer.loader)

    def step() -> None:
        nonlocal iterator
        try:
            images, labels = next(iterator)
        except StopIteration:
            iterator = iter(trainer.loader)
            images, labels = next(iterator)
        trainer.train_step(images, labels)

    return step


def block_ms(step: Callable[[], None], steps: int, sync: Callable[[], None]) -> tuple[float, float]:
    """The block's median step time, and its mean (the whole block over its steps)."""
    times = []
    sync()
    start = previous = time.perf_counter()
    for _ in range(steps):
        step()
        now = time.perf_counter()
        times.append((now - previous) * 1000.0)
        previous = now
    sync()
    return statistics.median(times), (time.perf_counter() - start) * 1000.0 / steps


def paired_slowdown_pct(hooked: list[float], bare: list[float]) -> float:
    """The median over ABBA quads of each quad's hooked/bare ratio, as a percentage.

    Pairing each quad's two hooked blocks with its own two bare ones cancels a drift slower
    than a quad (the VM's CPU speed wanders by tens of percent over minutes), which a ratio of
    medians over the whole run does not.
    """
    quads = [
        (hooked[i] + hooked[i + 1]) / (bare[i] + bare[i + 1])
        for i in range(0, min(len(hooked), len(bare)) - 1, 2)
    ]
    return (statistics.median(quads) - 1.0) * 100.0 if quads else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=("tiny", "gpt", "resnet-rung8"))
    parser.add_argument("--blocks", type=int, default=10, help="blocks per side")
    parser.add_argument("--steps", type=int, default=200, help="steps per block")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cpu":
        # One intra-op thread: on the shared 2-core dev box torch's pool spins against the
        # other jobs and a 1 ms CPU step took 200-340 ms (2026-11-24).
        torch.set_num_threads(1)
    make = {"tiny": tiny_workload, "gpt": gpt_workload}.get(args.workload, resnet_rung8_workload)

    patches.install(torch)
    step = make(device)
    for _ in range(args.warmup):
        step()  # also opens the hook's socket
    reader = start_reader(os.getpid(), 600.0)
    time.sleep(1.0)

    def measure(with_hook: bool, _: int) -> tuple[float, float]:
        if with_hook:
            patches.install(torch)
        else:
            patches.uninstall()
        return block_ms(step, args.steps, sync)

    # Blocks hooked / bare in ABBA order (HB BH HB ...): a linear drift cancels out.
    rounds = abba_rounds((True, False), args.blocks, measure)
    patches.install(torch)
    hooked, hooked_means = [r[True][0] for r in rounds], [r[True][1] for r in rounds]
    bare, bare_means = [r[False][0] for r in rounds], [r[False][1] for r in rounds]
    reader.terminate()
    ratio = statistics.median(hooked) / statistics.median(bare)
    mean_ratio = statistics.median(hooked_means) / statistics.median(bare_means)
    result = {
        "workload": args.workload,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "steps_per_block": args.steps,
        "blocks_per_side": args.blocks,
        "bare_ms_median": statistics.median(bare),
        "hooked_ms_median": statistics.median(hooked),
        "bare_blocks_ms": bare,
        "hooked_blocks_ms": hooked,
        "slowdown_pct": (ratio - 1.0) * 100.0,
        "bare_mean_blocks_ms": bare_means,
        "hooked_mean_blocks_ms": hooked_means,
        "slowdown_mean_pct": (mean_ratio - 1.0) * 100.0,
        "slowdown_paired_pct": paired_slowdown_pct(hooked, bare),
        "slowdown_paired_mean_pct": paired_slowdown_pct(hooked_means, bare_means),
    }
    print(json.dumps(result, indent=2))
    print(
        f"{args.workload}: bare {result['bare_ms_median']:.3f} ms, hooked "
        f"{result['hooked_ms_median']:.3f} ms, slowdown {result['slowdown_pct']:+.2f}% "
        f"(block means: {result['slowdown_mean_pct']:+.2f}%; paired by quad: "
        f"{result['slowdown_paired_pct']:+.2f}%, means {result['slowdown_paired_mean_pct']:+.2f}%)"
    )
    if args.json:
        write_result(args.json, json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
