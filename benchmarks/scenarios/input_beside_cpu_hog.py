"""An input-bound job on a shared machine: its Dataset reads each sample from slow storage,
and a neighbour's CPU-bound work keeps every core busy beside it.

Each item costs a read latency (``--read-ms``, 2 ms: a network file system or an object
store, as a sleep) and a lookup in a cache of preprocessed images; 2 DataLoader workers feed
a small convnet. ``--hog N`` (default: one per core) starts N spinning processes outside the
job's process tree, as another user's job would be: the machine reads 100% busy, yet the
job's workers use a few % of a core each. The loading waits on storage, not on the CPU, so
more workers overlap the reads: the fix is more workers, not cheaper samples. ``--workers 0
--hog 0`` on a busy box is the sleep-bound Dataset of issue 29.

``--read-ms 0 --cpu-ms 10`` makes the opposite case (issue 39): each item costs CPU work, not
a wait, and the hogs take the cores the loader needs. There the worker is ready to compute
but waits for a CPU; more workers share the same starved cores (told "raise num_workers to
3" on the 2-core box, following it measured 0.89-0.95x): the fix is cores for the job.

Fix, as a flag and as a live knob: --workers N (num_workers).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch
from _scenario import CUDA, Knobs, Option, fit_images, loader, parser, resnet18, run
from torch.utils.data import Dataset

OPTIONS = (
    Option("num_workers", 2, "--workers", rebuild=True, minimum=0, maximum=256, role="workers"),
)

# A spinning process that ends once the process that started it (argv[1]) is gone.
HOG = """
import os, sys, time
owner = int(sys.argv[1])
spin = 0
while True:
    try:
        os.kill(owner, 0)
    except OSError:
        break
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        spin += 1
"""


def start_hogs(count: int) -> None:
    """Start ``count`` spinning processes that are not this job's children (a launcher starts
    them and exits, so they are re-parented): the monitor sees them as other processes."""
    if not count:
        return
    launch = (
        "import subprocess, sys\n"
        f"for _ in range({count}):\n"
        f"    subprocess.Popen([sys.executable, '-c', {HOG!r}, '{os.getpid()}'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    subprocess.run([sys.executable, "-c", launch], check=True)


class SlowStorageImages(Dataset):
    """Preprocessed images behind a read latency: each item waits ``read_ms`` (storage) and
    costs a lookup; the CPU does almost nothing."""

    def __init__(self, side: int, read_ms: float, cpu_ms: float = 0.0, distinct: int = 64) -> None:
        self.images = torch.randint(0, 256, (distinct, 3, side, side), dtype=torch.uint8)
        self.labels = torch.randint(0, 1000, (distinct,))
        self.read_s = read_ms / 1000.0
        self.cpu_s = cpu_ms / 1000.0

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.read_s:
            time.sleep(self.read_s)
        spent, start = 0, time.thread_time()
        while time.thread_time() - start < self.cpu_s:  # CPU work: this thread's CPU time
            spent += 1
        i = index % len(self.images)
        return self.images[i], self.labels[i]


def train(args: argparse.Namespace) -> None:
    model = resnet18(args.small)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    config = Knobs.of(args, OPTIONS)
    start_hogs(args.hog)
    dataset = SlowStorageImages(64 if args.small else 224, args.read_ms, args.cpu_ms)

    def build() -> torch.utils.data.DataLoader:
        return loader(dataset, args.batch_size, config["num_workers"], CUDA)

    fit_images(args, config, build, model, optimizer, lambda images: images.float().div_(255.0),
               bf16=CUDA)  # fmt: skip


if __name__ == "__main__":
    options = parser(__doc__, batch=(16, 128), options=OPTIONS)
    options.add_argument("--read-ms", type=float, default=2.0, help="storage latency per item")
    options.add_argument("--cpu-ms", type=float, default=0.0, help="CPU work per item")
    options.add_argument("--hog", type=int, default=os.cpu_count() or 1, help="spinning processes")
    run(train, options)
