"""Another process on a GPU: bf16 matrix products for ``--duty`` of every 100 ms (the rest
asleep), for ``--seconds``; started outside the monitor, as another user's job would be
(docs/gpus.md: a job whose GPU another process loads)."""

from __future__ import annotations

import argparse
import time

import torch

PERIOD_S = 0.1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--duty", type=float, default=0.5)
    parser.add_argument("--gib", type=float, default=8.0, help="memory to hold")
    args = parser.parse_args()
    device = torch.device("cuda", args.device)
    held = torch.empty(int(args.gib * 2**30), dtype=torch.uint8, device=device)
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        busy_until = time.monotonic() + args.duty * PERIOD_S
        while time.monotonic() < busy_until:
            for _ in range(8):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize(device)
        time.sleep(max(0.0, (1 - args.duty) * PERIOD_S))
    del held


if __name__ == "__main__":
    main()
