"""What the calls the hook makes on the training thread cost on this host: clocks, a Python
call, CUDA event record and query, the allocator's statistics, each at the timeit minimum;
then the two ways to read the allocator once after each step of the gpt loop (the cost inside
a running loop, which the idle minimum does not show). GPU only.

    python -m benchmarks.overhead.cuda_call_costs
"""

from __future__ import annotations

import statistics
import threading
import time
import timeit
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.overhead.hook_overhead import gpt_workload


def per_call_us(call: Callable[[], Any], number: int) -> float:
    """The timeit minimum of five repeats, in µs a call."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("cuda_call_costs: needs a GPU")
    x = torch.randn(1024, 1024, device="cuda")
    (x @ x).sum().item()
    event = torch.cuda.Event(enable_timing=True)
    calls: dict[str, tuple[Callable[[], Any], int]] = {
        "time.perf_counter": (time.perf_counter, 200_000),
        "time.time": (time.time, 200_000),
        "threading.get_ident": (threading.get_ident, 200_000),
        "a Python call": (lambda: None, 200_000),
        "torch.cuda.is_initialized": (torch.cuda.is_initialized, 200_000),
        "Event.record": (event.record, 20_000),
        "Event.query": (event.query, 20_000),
        "torch.cuda.memory_stats": (torch.cuda.memory_stats, 2_000),
        "torch.cuda.memory_stats_as_nested_dict": (torch.cuda.memory_stats_as_nested_dict, 2_000),
    }
    for name, (call, number) in calls.items():
        print(f"idle, timeit minimum: {name} {per_call_us(call, number):.2f} us")
    step = gpt_workload("cuda")
    for _ in range(50):
        step()
    for name in ("torch.cuda.memory_stats", "torch.cuda.memory_stats_as_nested_dict"):
        read = calls[name][0]
        costs = []
        for _ in range(300):
            step()
            start = time.perf_counter()
            read()
            costs.append((time.perf_counter() - start) * 1e6)
        print(
            f"in the gpt loop, once a step: {name} mean {statistics.mean(costs):.1f} us, "
            f"median {statistics.median(costs):.1f} us"
        )


if __name__ == "__main__":
    main()
