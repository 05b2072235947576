"""A job whose every figure is measured, for tests that need each metric family to have a
sample (tests/test_recipes_metric.py)."""

from __future__ import annotations

from gputop_train import events
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.session.model import Session
from gputop_train.wire import STEP_FIELDS

from .clock import ManualClock

NOW = 1_800_000_000.0
GIB = 2**30
RANKS = {11: 0, 12: 1}  # PID -> rank, each rank on the GPU of its index
OTHER_PID = 900  # another user's process, on GPU 1
STEP_MS = 100.0
FACTS: list[dict[str, object]] = [  # each rank's: a bf16 GPU step, its FLOPs, syncs, memory
    {"type": "model", "cuda": True, "autocast": "bfloat16", "step": 2},
    {"type": "flops", "flops": 2 * 10**13, "samples": 8, "step": 3},
    {
        "type": "syncs",
        "count": 2,
        "sites": [{"file": "train.py", "line": 40, "op": "loss.item()", "count": 2}],
        "step": 3,
    },
    {
        "type": "memory_audit",
        "step": 3,
        "params_bytes": GIB,
        "grads_bytes": GIB,
        "optimizer_bytes": 2 * GIB,
        "allocated_peak": 12 * GIB,
        "reserved_peak": 14 * GIB,
        "allocated": 4 * GIB,
        "reserved": 14 * GIB,
        "alloc_retries": 3,
        "ooms": 0,
        "device_total": 80 * GIB,
    },
]


def measured_session(seconds_run: float = 20.0, ended: bool = True) -> Session:
    """Two ranks of a job (ended unless told) on two GPUs, another user's process on the
    second, every figure measured: steps split into parts, tokens, waits in collectives,
    FLOPs, syncs, the memory audit. Rank 1 waits 30 ms a step for its input (a straggler
    finding), and rank 0 waits for it in the all-reduce."""
    clock = ManualClock(NOW - seconds_run)
    session = Session(command=("torchrun", "train.py"), clock=clock, started_at=NOW - 25.0)
    gpus = [
        FakeGpu(
            util=95,
            mem_used=62 * GIB,
            power_mw=600_000,
            gpm={2: 90.0, 3: 40.0, 5: 60.0, 10: 50.0},
            processes=[(pid, 62 * GIB, 90)],
        )
        for pid in RANKS
    ]
    gpus[1].processes.append((OTHER_PID, 9 * GIB, 20))
    fake = FakeNvml(gpus)
    fake.owners[OTHER_PID] = ("alice", "python")
    sampler = NvmlSampler(fake, clock=clock, wall_clock=clock, owner=fake.owner)
    names = tuple(sampler.open())
    ids = sampler.identities()
    uuids, buses = tuple(u for u, _ in ids), tuple(b for _, b in ids)
    session.apply(events.GpusFound(names, uuids=uuids, pci_bus_ids=buses))
    for pid, rank in RANKS.items():
        hello = {"rank": rank, "local_rank": rank, "world_size": len(RANKS), "host": "node"}
        session.apply(events.ProcessHello.of(pid, {**hello, "argv": ["train.py"]}))
        for fact in FACTS:
            session.apply(events.FactSeen.of(pid, dict(fact)))
        data_ms, comm_ms = (30.0, 1.0) if rank else (1.0, 25.0)
        measured: dict[str, object] = {
            "step_ms": STEP_MS,
            "data_ms": data_ms,
            "samples": 8,
            "batches": 1,
            "gpu_ms": 70.0,
            "comm_ms": comm_ms,
            "tokens": 8 * 1024,
            "part_data_ms": data_ms,
            "part_fwd_ms": 20.0,
            "part_bwd_ms": 40.0,
            "part_opt_ms": 8.0,
            "part_rest_ms": 2.0,
            "part_clock": "gpu",
        }  # the step row's other fields: not measured (None)
        rows = [
            [
                {"step": step, "t": clock.now + step * STEP_MS / 1000.0, **measured}.get(f)
                for f in STEP_FIELDS
            ]
            for step in range(1, int(seconds_run * 1000.0 / STEP_MS))
        ]
        session.apply(events.StepRows(pid, tuple(rows)))
    for i in range(int(seconds_run * 10)):
        clock.now = NOW - seconds_run + i * 0.1
        session.apply(events.GpuSampled(sampler.sample()))
    clock.now = NOW
    if ended:
        session.apply(events.JobEnded(0))
    return session
