"""A scripted session for TUI tests: fixed clock, fake GPU and process samples, real model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputop_train import events
from gputop_train.collect.fake import FakeGpu, FakeNvml, FakeProcess, FakePsutil
from gputop_train.collect.nvml import NvmlSampler
from gputop_train.collect.procs import ProcessSampler
from gputop_train.record.recorder import Recorder
from gputop_train.samples import GpuProcess, GpuSample
from gputop_train.session.model import Session

from .clock import ManualClock

NOW = 1_800_000_000.0
KNOBS: list[dict[str, Any]] = [
    {
        "name": "num_workers",
        "kind": "int",
        "value": 8,
        "min": 0,
        "max": 64,
        "help": "DataLoader worker processes (rung 1)",
    },
    {"name": "pin_memory", "kind": "bool", "value": True, "help": "pinned memory (rung 2)"},
    {
        "name": "input",
        "kind": "choice",
        "value": "float",
        "choices": ["float", "uint8", "gpu-resize"],
        "help": "what crosses PCIe",
    },
]
JOB_PID = 4242


def scripted_session(with_gpu: bool = True, recorder: Recorder | None = None) -> Session:
    """Two minutes of a run at the playbook's rung 4: workers busy, GPU partly idle."""
    clock = ManualClock(NOW - 120.0)
    session = Session(
        command=("python", "demos/resnet.py", "--workers", "8"), clock=clock, started_at=NOW - 125.0
    )
    if recorder is not None:  # record with the fake clock's times, as the monitor would live
        recorder._clock = clock
        session.listener = recorder.record_event
    session.apply(events.CoresCounted(16))  # the H100 box of the playbook's measurements
    session.apply(
        events.ProcessHello.of(
            JOB_PID, {"rank": None, "argv": ["demos/resnet.py"], "torch": "2.11"}
        )
    )
    session.apply(events.KnobsDeclared(JOB_PID, tuple(KNOBS)))
    rows = []
    t = NOW - 120.0
    for step in range(1, 900):
        step_ms = 137.0 + (step % 7) * 3.0
        data_ms = 40.0 + (step % 5) * 4.0
        t += step_ms / 1000.0
        if t > NOW:
            break
        rows.append([step, t, step_ms, data_ms, 512, 1, step_ms * 0.7, None, None, None])
    session.apply(events.StepRows(JOB_PID, tuple(rows[:300])))
    session.apply(
        events.KnobOutcome.of(
            JOB_PID,
            {
                "seq": 1,
                "name": "input",
                "ok": True,
                "value": "uint8",
                "previous": "float",
                "step": 300,
                "t": rows[299][1],
            },
        )
    )
    session.apply(events.StepRows(JOB_PID, tuple(rows[300:])))
    if with_gpu:
        gpu = FakeGpu(
            util=77,
            mem_used=11 * 2**30,
            power_mw=420_000,
            temp=51,
            gpm={2: 61.0, 3: 35.0, 5: 0.4, 10: 30.0, 20: 1.0, 21: 1900.0},
            processes=[(JOB_PID, 11 * 2**30, 74)],
        )
        sampler = NvmlSampler(FakeNvml([gpu]), clock=clock, wall_clock=clock)
        session.apply(events.GpusFound(tuple(sampler.open())))
        for i in range(1200):
            clock.now = NOW - 120.0 + i * 0.1
            gpu.util = 60 + (i * 7) % 35
            gpu.gpm[5] = float(i % 3)  # type: ignore[index]
            session.apply(events.GpuSampled(sampler.sample()))
    else:
        session.apply(
            events.GpusFound((), error="no NVIDIA driver here (NVML Shared Library Not Found)")
        )
    processes = [FakeProcess(JOB_PID, 1, "python3", cpu=71.0, rss=3 * 2**30)]
    processes += [
        FakeProcess(
            JOB_PID + i, JOB_PID, "pt_data_worker", cpu=97.0 + i % 3, rss=700 * 2**20, read_bytes=0
        )
        for i in range(1, 9)
    ]
    # 8 workers at ~98% and the training process at 71% keep 53% of 16 cores busy.
    psutil = FakePsutil(processes, system_cpu_pct=53.0)
    sampler_procs = ProcessSampler(JOB_PID, session.hooked_pids, psutil, clock=clock)
    clock.now = NOW - 1.0
    sampler_procs.sample()
    clock.now = NOW
    for process in processes[1:]:
        process.read_bytes += 3_000_000  # each worker read 3 MB in that second
    session.apply(events.ProcsSampled(sampler_procs.sample(), sampler_procs.system_cpu_pct))
    return session


def scripted_recording(path: Path) -> Path:
    """The scripted session, recorded to ``path``."""
    meta = {"command": ["python", "demos/resnet.py"], "started_at": NOW - 125.0, "cpu_count": 16}
    recorder = Recorder(path, meta, clock=ManualClock(NOW - 125.0))
    scripted_session(recorder=recorder)
    recorder.close()
    return path


def two_rank_session() -> Session:
    """Two ranks of one torchrun job, the second waiting 30 ms a step for data."""
    clock = ManualClock(1000.0)
    session = Session(command=("torchrun", "train.py"), clock=clock, started_at=990.0)
    for pid, rank_index, wait_ms in ((11, 0, 1.0), (12, 1, 30.0)):
        hello = {"rank": rank_index, "local_rank": rank_index, "host": "node", "argv": ["t.py"]}
        session.apply(events.ProcessHello.of(pid, hello))
        rows = [
            [i, 990.0 + i * 0.05, 50.0, wait_ms, 8, 1, None, None, None, None] for i in range(1, 61)
        ]
        session.apply(events.StepRows(pid, tuple(rows)))
    session.apply(
        events.GpuSampled(  # each rank on its own GPU, as NVML lists their processes
            tuple(
                GpuSample(index, 1000.0, processes=(GpuProcess(pid, 2 << 30, 80.0),))
                for index, pid in enumerate((11, 12))
            )
        )
    )
    return session
