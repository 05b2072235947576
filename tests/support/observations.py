"""A synthetic observation of a healthy GPU-bound step, for the rules' tests to change."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputop_train import wire
from gputop_train.advise import rules
from gputop_train.session.stats import GpuStats, Observation, StepStats

GiB = 2**30
BF16_H100 = wire.Model(
    cuda=True,
    capability=[9, 0],
    autocast="bfloat16",
    param_dtype="float32",
    tf32_matmul=False,
    tf32_cudnn=True,
    channels_last=True,
    compiled=True,
)
FP32_H100 = replace(BF16_H100, autocast="off", channels_last=False, compiled=False)
# The playbook's rung 0 as the monitor sees it on the H100 (docs/benchmarks.md has the runs):
# no workers, float 224-pixel batches, fp32.
RUNG0 = dict(
    step_data_wait_pct=75.0,
    step_gpu_time_pct=27.0,
    gpu_sm_active_pct=11.0,
    gpu_util_pct=16.0,
    gpu_tensor_active_pct=1.0,
    gpu_mem_used_bytes=3 * GiB,
    workers=0,
    worker_cpu_pct=None,
    main_cpu_pct=100.0,
    batch_dtype="torch.float32",
    batch_shape=(32, 3, 224, 224),
    batch_bytes=19 * 2**20,
    pin_memory=False,
    model=FP32_H100,
)


def observe(**changes: Any) -> Observation:
    """A healthy GPU-bound step on a 16-core box; each test changes what it is about."""
    steps = StepStats(100, 10.0, 5000.0, 100.0, 110.0, 1.0, 99.0)
    gpu = GpuStats(99.0, 92.0, 25.0, 20 * GiB, 80 * GiB, 600.0)
    base = Observation(
        steps=steps,
        gpu=gpu,
        gpu_name="NVIDIA H100 80GB HBM3",
        pcie_rx_mibps=100.0,
        workers=4,
        worker_cpu_pct=30.0,
        main_cpu_pct=60.0,
        cpu_count=16,
        batch_dtype="torch.uint8",
        batch_shape=(1024, 3, 32, 32),
        batch_bytes=3 * 2**20,
        pin_memory=True,
        persistent_workers=True,
        syncs_per_step=0,
        sync_sites=(),
        flops_per_sample=5.5e9,
        model=BF16_H100,
        system_cpu_pct=20.0,
        epochs=0,
        window_s=10.0,
    )
    step_changes = {k[5:]: v for k, v in changes.items() if k.startswith("step_")}
    gpu_fields = {f"gpu_{name}" for name in GpuStats.__dataclass_fields__}
    gpu_changes = {k[4:]: v for k, v in changes.items() if k in gpu_fields}
    other = {k: v for k, v in changes.items() if not k.startswith("step_") and k not in gpu_fields}
    return replace(
        base, steps=replace(steps, **step_changes), gpu=replace(gpu, **gpu_changes), **other
    )


def ids(o: Observation) -> list[str]:
    """The findings' ids, best first."""
    return [f.id for f in rules.findings(o)]


def headline(o: Observation) -> rules.Finding:
    return rules.findings(o)[0]


# The ImageNet-style script of the diagnosis issue: 4 workers at ~95% on 16 cores, most idle;
# input-bound.
IMAGENET_4_WORKERS: dict[str, Any] = {
    **RUNG0,
    "step_data_wait_pct": 78.0,
    "workers": 4,
    "worker_cpu_pct": 95.0,
    "main_cpu_pct": 40.0,
    "pin_memory": True,
    "system_cpu_pct": 30.0,
    "batch_shape": (256, 3, 224, 224),
}
