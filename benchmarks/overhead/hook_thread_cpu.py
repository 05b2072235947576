"""The training thread's own CPU time a step, hook installed against removed, in one process.

Blocks of steps alternate (ABBA) between the hook installed and removed (``uninstall``);
each block's cost is ``time.thread_time()`` (the training thread only: the hook's own thread
and the machine's other load are not in it) over its steps. A tiny model on the CPU makes the
hook's per-step Python the largest part a block can change. ``--tree`` runs another checkout
(the commit before) the same way, so two trees can be compared side by side in one session.
``--monitor`` connects a monitor (a reader process, as hook_overhead.py does), so the hook's
thread sends rows; then the process's CPU a step (``process_time``: the training thread and
the hook's thread, which holds the GIL while it works) is reported beside the thread's.

    python -m benchmarks.overhead.hook_thread_cpu --tree /tmp/tm_base --blocks 8 --steps 2000 \
        --monitor
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from benchmarks.common.reader import start_reader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", default=None, help="checkout whose gputop_train to import")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--monitor", action="store_true", help="a monitor reads the rows")
    args = parser.parse_args()
    if args.tree:
        sys.path.insert(0, args.tree)
    from gputop_train.hook import patches

    torch.set_num_threads(1)
    torch.manual_seed(0)
    # Token ids in, so the hook's forward counts tokens as on a language model.
    model = torch.nn.Sequential(
        torch.nn.Embedding(64, 16), torch.nn.Flatten(), torch.nn.Linear(16 * 8, 4)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randint(0, 64, (4, 8))
    y = torch.randint(0, 4, (4,))

    process_us: list[float] = []

    def block() -> float:
        start, process_start = time.thread_time(), time.process_time()
        for _ in range(args.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        process_us.append((time.process_time() - process_start) / args.steps * 1e6)
        return (time.thread_time() - start) / args.steps * 1e6

    patches.install(torch)
    block()  # warm-up hooked: the model found, the probes of the first steps done
    reader = None
    if args.monitor:
        reader = start_reader(os.getpid(), 600.0)
        time.sleep(3.0)  # connected, its hello and backlog sent
    patches.uninstall()
    block()
    on: list[float] = []
    off: list[float] = []
    process_on: list[float] = []
    process_off: list[float] = []
    for index in range(args.blocks):
        hooked = index % 4 in (0, 3)  # ABBA
        if hooked:
            patches.install(torch)
        (on if hooked else off).append(block())
        (process_on if hooked else process_off).append(process_us[-1])
        if hooked:
            patches.uninstall()
    if reader is not None:
        reader.terminate()
    import gputop_train

    print(
        json.dumps(
            {
                "tree": gputop_train.__file__,
                "steps_per_block": args.steps,
                "bare_us": round(statistics.median(off), 1),
                "hooked_us": round(statistics.median(on), 1),
                "added_us": round(statistics.median(on) - statistics.median(off), 1),
                "monitor": args.monitor,
                "process_added_us": round(
                    statistics.median(process_on) - statistics.median(process_off), 1
                ),
                "on": [round(v, 1) for v in on],
                "off": [round(v, 1) for v in off],
            }
        )
    )


if __name__ == "__main__":
    main()
