"""A scripted node of several GPUs (fake NVML) with a job on some of them, other processes
beside it and, where asked, one throttled GPU: the multi-GPU tests' session (issue 37)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop_train import events
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.samples import ProcSample
from gputop_train.session.model import Session

from .clock import ManualClock

NOW = 1_800_000_000.0
GIB = 2**30
STEP_MS = 280.0  # the GPU-bound transformer step of the issue (H100, 2026-11-27)


@dataclass
class Node:
    """What runs where: the job's ranks (pid -> GPU index), other processes (GPU index ->
    (pid, user, GiB, SM %)), a throttled GPU."""

    gpus: int = 8
    ranks: dict[int, int] = field(default_factory=lambda: {4242: 1})
    others: dict[int, list[tuple[int, str, float, int]]] = field(default_factory=dict)
    throttled: int | None = None
    visible: str | None = None  # CUDA_VISIBLE_DEVICES as the monitor runs
    nvml_sees_job: bool = True  # False: another PID namespace (a container)
    hook_reports_uuid: bool = False
    touched: bool = True  # False: the job has not touched a GPU yet
    data_ms: float = 0.5
    main_cpu_pct: float = 99.0  # a GPU-bound loop spins in the CUDA sync
    facts: list[dict[str, object]] = field(default_factory=list)  # each rank's fact frames
    comm_ms: dict[int, float] = field(default_factory=dict)  # pid -> its wait in collectives
    broken: dict[int, str] = field(default_factory=dict)  # GPU index -> "lost" / "unknown"
    absent: frozenset[str] = frozenset()  # NVML functions this binding lacks
    binding: type[FakeNvml] = FakeNvml  # OldBindingNvml: pynvml 11.4.1


def uuid(index: int) -> str:
    return f"GPU-5a1e{index:04x}-0000-4000-8000-{index:012d}"


def node_session(node: Node, seconds: float = 20.0) -> tuple[Session, FakeNvml]:
    """``seconds`` of a GPU-bound job on ``node``: its ranks' steps, NVML at 10 Hz."""
    clock = ManualClock(NOW - seconds)
    session = Session(command=("python", "train.py"), clock=clock, started_at=NOW - seconds - 5)
    session.apply(events.CoresCounted(16))
    gpus = [FakeGpu(uuid=uuid(i), gpm={}, broken=node.broken.get(i)) for i in range(node.gpus)]
    fake = node.binding(gpus, absent=node.absent)
    sampler = NvmlSampler(fake, clock=clock, wall_clock=clock, owner=fake.owner)
    names = sampler.open()
    ids = sampler.identities()
    session.apply(
        events.GpusFound(
            tuple(names),
            uuids=tuple(u for u, _ in ids),
            pci_bus_ids=tuple(b for _, b in ids),
            visible_devices=node.visible,
        )
    )
    multi = len(node.ranks) > 1
    for rank, pid in enumerate(sorted(node.ranks)):
        hello = {"rank": rank if multi else None, "argv": ["train.py"], "torch": "2.11"}
        if multi:
            hello.update(local_rank=rank, world_size=len(node.ranks), host="node")
        session.apply(events.ProcessHello.of(pid, hello))
        for fact in node.facts:
            session.apply(events.FactSeen.of(pid, dict(fact)))
    for index, gpu in enumerate(fake.gpus):
        job = [pid for pid, on in node.ranks.items() if on == index] if node.touched else []
        busy = bool(job)
        gpu.util = 100 if busy else 0
        gpu.gpm.update({2: 95.0 if busy else 0.0, 3: 40.0, 5: 60.0 if busy else 0.0, 10: 50.0})
        gpu.mem_used = (62 * GIB if busy else GIB // 2) + sum(
            int(g * GIB) for _, _, g, _ in node.others.get(index, [])
        )
        gpu.power_mw = 612_000 if busy else 70_000
        gpu.processes = [(pid, 62 * GIB, 95) for pid in job] if node.nvml_sees_job else []
        for pid, user, gib, sm in node.others.get(index, []):
            gpu.processes.append((pid, int(gib * GIB), sm))
            fake.owners[pid] = (user, "python")
        if index == node.throttled:
            gpu.sm_clock = 1200
            gpu.throttle_bits = 0x20  # sw_thermal
    rows: dict[int, list[list[object]]] = {pid: [] for pid in node.ranks}
    t, step = NOW - seconds, 0
    while t + STEP_MS / 1000.0 <= NOW:
        step += 1
        t += STEP_MS / 1000.0
        for pid, index in node.ranks.items():
            slow = 1.5 if index == node.throttled else 1.0
            gpu_ms, comm = STEP_MS * 0.99 / slow, node.comm_ms.get(pid)
            rows[pid].append([step, t, STEP_MS, node.data_ms, 8, 1, gpu_ms, None, None, None, comm])
    for first in range(0, step, 2):  # as the hooks send them: each rank's rows in turn
        for pid, pid_rows in rows.items():
            session.apply(events.StepRows(pid, tuple(pid_rows[first : first + 2])))
    if node.hook_reports_uuid:
        for pid, index in node.ranks.items():
            model = {"type": "model", "cuda": True, "device_uuid": uuid(index), "step": 2}
            session.apply(events.FactSeen.of(pid, model))
    for i in range(int(seconds * 10)):
        clock.now = NOW - seconds + i * 0.1
        session.apply(events.GpuSampled(sampler.sample()))
    clock.now = NOW
    procs = tuple(
        ProcSample(pid, 1, "python", "main", node.main_cpu_pct, GIB, 0.0, 0.0, "running")
        for pid in node.ranks
    )
    session.apply(events.ProcsSampled(procs, 10.0))
    session.apply(events.ProcsSampled(procs, 10.0))
    return session, fake
