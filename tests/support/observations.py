"""A synthetic observation of a healthy GPU-bound step, for the rules' tests to change."""

from __future__ import annotations

from dataclasses import replace

from gputop_train.session.stats import GpuStats, ModelFacts, Observation, StepStats

GiB = 2**30
BF16_H100 = ModelFacts(
    cuda=True,
    capability=(9, 0),
    autocast="bfloat16",
    param_dtype="float32",
    tf32_matmul=False,
    tf32_cudnn=True,
    channels_last=True,
    compiled=True,
)
FP32_H100 = replace(BF16_H100, autocast="off", channels_last=False, compiled=False)


def observe(**changes: object) -> Observation:
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
