"""A long multi-rank recording written directly as the recorder writes its lines (each event's
own ``events.encode``), for the report's size and speed: an hour of 8 ranks takes seconds to
write, where a real one takes an hour and 8 GPUs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gputop_train import events
from gputop_train.record.recorder import FORMAT_VERSION
from gputop_train.samples import GpuSample, ProcSample

GIB = 2**30


def write_synthetic(
    path: Path,
    ranks: int = 8,
    seconds: float = 3600.0,
    step_ms: float = 250.0,
    straggler: int = 3,
    knob_at_s: float | None = None,
    workers: int = 0,
    busy_pct: float = 80.0,
    worker_cpu_pct: float = 95.0,
) -> int:
    """A DDP-shaped run: every rank steps every ``step_ms`` (the straggler's data-wait is 40%
    of it, the others wait for it in collectives), 8 GPUs sampled at 2 Hz, hooks sending every
    0.5 s, a ``num_workers`` change at ``knob_at_s`` (half-way by default); with ``workers``,
    a process sample each second of every rank and its DataLoader workers, the machine's 64
    cores ``busy_pct`` busy, each worker at ``worker_cpu_pct`` of a core. Returns the lines."""
    start = 1_790_000_000.0
    knob_at_s = seconds / 2 if knob_at_s is None else knob_at_s
    lines: list[str] = []

    def put(t: float, item: events.Event) -> None:
        kind, payload = events.encode(item)
        lines.append(json.dumps({"kind": kind, "t": t, **payload}))

    lines.append(json.dumps({"kind": "meta", "t": start, "format": FORMAT_VERSION,
                             "command": ["torchrun", "--nproc-per-node", str(ranks), "train.py"],
                             "host": "synthetic", "started_at": start, "cpu_count": 64,
                             "gputop_train": "synthetic"}))  # fmt: skip
    put(start, events.GpusFound(names=("NVIDIA H100 80GB HBM3",) * ranks, driver="550.0"))
    pids = [1000 + r for r in range(ranks)]
    for rank, pid in enumerate(pids):
        put(start + 1, events.ProcessHello(pid=pid, argv=("train.py",), rank=rank,
                                           local_rank=rank, torch="2.14.1", host="synthetic",
                                           world_size=ranks))  # fmt: skip
        put(start + 1, events.KnobsDeclared(pid=pid, knobs=(
            {"name": "num_workers", "kind": "int", "value": 2, "help": "DataLoader workers",
             "min": 0, "max": 64},)))  # fmt: skip
    step_s = step_ms / 1000.0
    steps = int((seconds - 2) / step_s)
    knob_step = int(knob_at_s / step_s)
    batch: dict[int, list[list[Any]]] = {pid: [] for pid in pids}
    next_send, next_gpu, next_procs = start + 2.5, start + 2.0, start + 2.0
    for n in range(1, steps + 1):
        t = start + 2 + n * step_s
        faster = n > knob_step
        for rank, pid in enumerate(pids):
            wobble = 1.0 + 0.05 * math.sin(n / 37.0 + rank)
            ms = step_ms * wobble * (0.8 if faster else 1.0)
            data = ms * (0.4 if rank == straggler and not faster else 0.02)
            comm = 0.5 if rank == straggler else ms * 0.3
            alloc = int((20 + 4 * math.sin(n / 500.0)) * GIB)
            batch[pid].append([n, t, ms, data, 32, 1, ms * 0.9, alloc, 30 * GIB, 26 * GIB, comm,
                               32 * 2048, 0.1, data, ms * 0.25, ms * 0.45, ms * 0.05,
                               ms * 0.25 - data if ms * 0.25 > data else 0.0, "gpu"])  # fmt: skip
        if n == knob_step:
            put(t, events.KnobRequested(name="num_workers", value=8))
            for seq, pid in enumerate(pids, start=1):
                put(t, events.KnobOutcome(pid=pid, name="num_workers", value=8, ok=True,
                                          previous=2, step=n, seq=seq, t=t))  # fmt: skip
        while next_gpu <= t:
            util = 60.0 if n <= knob_step else 85.0
            put(next_gpu, events.GpuSampled(tuple(
                GpuSample(index=i, t=next_gpu, name="NVIDIA H100 80GB HBM3",
                          util_pct=util + 10 * math.sin(next_gpu / 50 + i),
                          mem_used_bytes=int((28 + i * 0.2) * GIB), mem_total_bytes=80 * GIB,
                          power_w=500.0, sm_active_pct=util * 0.8)
                for i in range(ranks))))  # fmt: skip
            next_gpu += 0.5
        while workers and next_procs <= t:
            put(next_procs, events.ProcsSampled(tuple(
                ProcSample(pid=pid * 100 + w if w else pid, ppid=pid if w else 1, name="python",
                           role="worker" if w else "main",
                           cpu_pct=worker_cpu_pct if w else 60.0,
                           rss_bytes=2 * GIB, io_read_bps=1e6, io_write_bps=0.0, status="R")
                for pid in pids for w in range(workers + 1)), busy_pct, 64.0))  # fmt: skip
            next_procs += 1.0
        if t >= next_send:
            for pid in pids:
                put(t, events.StepRows(pid=pid, rows=tuple(batch[pid])))
                batch[pid] = []
            next_send += 0.5
    end = start + 2 + steps * step_s
    for pid in pids:
        if batch[pid]:
            put(end, events.StepRows(pid=pid, rows=tuple(batch[pid])))
    put(end, events.JobEnded(exit_code=0, at=end))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)
