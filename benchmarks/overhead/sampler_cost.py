"""What the monitor's samplers cost: wall time and CPU time of the calling thread.

    python -m benchmarks.overhead.sampler_cost [--reps 50] [--pid PID [--stack-window S]] \
        [--no-nvml]
        [--json FILE]

Times each NVML call the GPU sampler makes, then one whole ``NvmlSampler.sample()`` in its
fast and its medium tier as the monitor calls it, and with ``--pid`` one
``ProcessSampler.sample()`` of that process tree (a training job with its workers) and one
look for that process's children, in a full scan of its threads and between scans, and with
``--stack-window S`` also what one py-spy window on that PID costs (a job without the hook:
py-spy runs as a child, so its CPU is read from the children's rusage). Wall time
is what a call delays its sampler thread; CPU time is what it takes from the monitor's CPU
budget (a call that waits on the driver costs wall time, not CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common.provenance import write_result
from gputop_train.collect import nvml as nvml_sampler
from gputop_train.collect.procs import ProcessSampler, ProcfsChildren
from gputop_train.collect.stacks import StackSampler


def cost(call: Callable[[], Any], reps: int) -> dict[str, float | str]:
    """Median wall and thread-CPU microseconds of ``call``; the error if it fails."""
    walls, cpus = [], []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            call()
        except Exception as error:
            return {"error": str(error)}
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return {
        "wall_us": round(statistics.median(walls) * 1e6, 1),
        "cpu_us": round(statistics.median(cpus) * 1e6, 1),
    }


def stack_window_cost(pid: int, window_s: float, rounds: int = 3) -> dict[str, float]:
    """CPU of py-spy (a child process) per window, median of ``rounds`` windows."""
    sampler = StackSampler(pid, window_s=window_s)
    cpus = []
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.sample()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    cpu = statistics.median(cpus)
    return {
        "window_s": sampler.window_s,
        "cpu_ms": round(cpu * 1000, 1),
        "pct_of_a_core": round(100 * cpu / sampler.window_s, 2),
    }


def children_costs(pid: int, reps: int) -> dict[str, Any]:
    """One process's children from /proc: every thread's file (a full scan) against the main
    thread's and those that had children (between full scans)."""
    ticks = iter(range(0, 10**9, 3600))  # each call an hour later: every one a full scan
    full_scan = ProcfsChildren(clock=lambda: float(next(ticks)))
    between = ProcfsChildren(clock=lambda: 0.0)
    between(pid)  # the first call scans in full and remembers the parents
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return {
        "children_full_scan": {**cost(lambda: full_scan(pid), reps), "threads": threads},
        "children_between_scans": cost(lambda: between(pid), reps),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--pid", type=int, help="also time the process sampler on this tree")
    parser.add_argument("--stack-window", type=float, help="also time py-spy windows on --pid")
    parser.add_argument("--no-nvml", action="store_true", help="skip the NVML calls (no GPU)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    if args.pid:
        procs = ProcessSampler(args.pid)
        results["process_sampler"] = {**cost(procs.sample, 10), "processes": len(procs.sample())}
        results.update(children_costs(args.pid, args.reps))
        if args.stack_window:
            results["py_spy_window"] = stack_window_cost(args.pid, args.stack_window)
    if args.no_nvml:
        report(results, args.json)
        return
    import pynvml as nv

    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(0)
    calls: dict[str, Callable[[], Any]] = {
        "utilization": lambda: nv.nvmlDeviceGetUtilizationRates(handle),
        "memory": lambda: nv.nvmlDeviceGetMemoryInfo(handle),
        "power": lambda: nv.nvmlDeviceGetPowerUsage(handle),
        "energy": lambda: nv.nvmlDeviceGetTotalEnergyConsumption(handle),
        "temperature": lambda: nv.nvmlDeviceGetTemperature(handle, 0),
        "sm_clock": lambda: nv.nvmlDeviceGetClockInfo(handle, 1),
        "throttle": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle),
        "processes": lambda: nv.nvmlDeviceGetComputeRunningProcesses(handle),
        "process_utilization": lambda: nv.nvmlDeviceGetProcessUtilization(handle, 0),
        "pcie_rx": lambda: nv.nvmlDeviceGetPcieThroughput(handle, 1),
    }
    results.update({name: cost(call, args.reps) for name, call in calls.items()})
    sample = nv.nvmlGpmSampleAlloc()
    results["gpm_sample"] = cost(lambda: nv.nvmlGpmSampleGet(handle, sample), args.reps)
    nv.nvmlGpmSampleFree(sample)
    nv.nvmlShutdown()

    sampler = nvml_sampler.NvmlSampler()
    sampler.open()
    sampler.sample()
    time.sleep(nvml_sampler.MEDIUM_PERIOD_S)
    tiers: dict[str, list[tuple[float, float]]] = {"fast": [], "medium": []}
    for _ in range(3 * int(nvml_sampler.MEDIUM_PERIOD_S / 0.1)):
        time.sleep(0.1)
        medium = time.monotonic() >= sampler._next_medium
        wall, cpu = time.perf_counter(), time.thread_time()
        sampler.sample()
        tiers["medium" if medium else "fast"].append(
            (time.perf_counter() - wall, time.thread_time() - cpu)
        )
    sampler.close()
    for tier, timings in tiers.items():
        results[f"sampler_{tier}_tier"] = {
            "wall_us": round(statistics.median(w for w, _ in timings) * 1e6, 1),
            "cpu_us": round(statistics.median(c for _, c in timings) * 1e6, 1),
            "calls": len(timings),
        }
    report(results, args.json)


def report(results: dict[str, Any], path: Path | None) -> None:
    for name, result in results.items():
        print(f"{name:24} {json.dumps(result)}")
    if path:
        write_result(path, json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
