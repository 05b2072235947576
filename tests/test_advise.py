"""Each rule on synthetic observations that must, and must not, trigger it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_train.advise import rules
from gputop_train.advise.mfu import achieved_tflops, efficiency, mfu_pct, peak_tflops
from gputop_train.session.stats import GpuStats, Observation, StepStats

GiB = 2**30


def observe(**changes: object) -> Observation:
    """A healthy GPU-bound step; each test changes what it is about."""
    steps = StepStats(100, 10.0, 5000.0, 100.0, 110.0, 1.0, 99.0)
    gpu = GpuStats(99.0, 92.0, 25.0, 20 * GiB, 80 * GiB, 600.0)
    base = Observation(
        steps=steps,
        gpu=gpu,
        gpu_name="NVIDIA H100 80GB HBM3",
        pcie_rx_mibps=100.0,
        workers=4,
        worker_cpu_pct=30.0,
        main_cpu_pct=95.0,
        cpu_count=16,
        batch_dtype="torch.uint8",
        batch_shape=(1024, 3, 32, 32),
        batch_bytes=3 * 2**20,
        pin_memory=True,
        persistent_workers=True,
        syncs_per_step=0,
        sync_sites=(),
        flops_per_sample=5.5e9,
        precision="bf16",
    )
    step_changes = {k[5:]: v for k, v in changes.items() if k.startswith("step_")}
    gpu_changes = {k[4:]: v for k, v in changes.items() if k.startswith("gpu_")}
    other = {k: v for k, v in changes.items() if not k.startswith(("step_", "gpu_"))}
    return replace(
        base, steps=replace(steps, **step_changes), gpu=replace(gpu, **gpu_changes), **other
    )


def headline(o: Observation) -> str:
    return rules.findings(o)[0].id


# The playbook's rungs as the monitor sees them (docs/benchmarks.md has the H100 runs).
RUNG0 = dict(
    step_data_wait_pct=75.0,
    gpu_sm_active_pct=11.0,
    gpu_util_pct=16.0,
    gpu_tensor_active_pct=1.0,
    gpu_mem_used_bytes=3 * GiB,
    workers=0,
    worker_cpu_pct=None,
    batch_dtype="torch.float32",
    batch_shape=(32, 3, 224, 224),
    batch_bytes=19 * 2**20,
    pin_memory=False,
    precision="fp32",
)


def test_a_gpu_bound_step_is_called_healthy() -> None:
    assert headline(observe()) == "gpu.bound"


def test_no_workers_and_a_long_wait_asks_for_workers() -> None:
    finding = rules.findings(observe(**RUNG0))[0]
    assert finding.id == "input.more_workers"
    assert "75%" in finding.evidence[0] and "num_workers" in finding.action


def test_saturated_workers_building_float_batches_ask_for_uint8() -> None:
    o = observe(**{**RUNG0, "workers": 8, "worker_cpu_pct": 98.0, "pin_memory": True})
    assert headline(o) == "input.uint8"


def test_saturated_workers_on_uint8_ask_for_gpu_preprocessing_not_more_workers() -> None:
    o = observe(**{**RUNG0, "workers": 15, "worker_cpu_pct": 97.0, "batch_dtype": "torch.uint8"})
    ids = [f.id for f in rules.findings(o)]
    assert ids[0] == "input.gpu_preprocessing" and "input.more_workers" not in ids


@pytest.mark.parametrize("persistent", [False, True])
def test_a_wait_with_idle_workers_is_not_blamed_on_their_compute(persistent: bool) -> None:
    # The 2-core dev box: 2 workers at 4% CPU hold half the cores, yet the step waits.
    o = observe(
        **{**RUNG0, "step_data_wait_pct": 40.0, "workers": 2, "worker_cpu_pct": 4.0},
        cpu_count=2,
        persistent_workers=persistent,
    )
    ids = [f.id for f in rules.findings(o)]
    assert ids[0] == "input.idle_workers"
    assert not {"input.more_workers", "input.uint8", "input.gpu_preprocessing"} & set(ids)
    action = rules.findings(o)[0].action
    assert ("persistent_workers=True" in action) is (not persistent)


def test_more_workers_is_not_offered_without_a_core_to_run_them() -> None:
    o = observe(**{**RUNG0, "workers": 3, "worker_cpu_pct": 60.0}, cpu_count=4)
    assert "input.more_workers" not in [f.id for f in rules.findings(o)]


def test_a_wait_on_data_is_ignored_while_the_gpu_is_saturated() -> None:
    assert "input.more_workers" not in [
        f.id for f in rules.findings(observe(step_data_wait_pct=8.0))
    ]


def test_an_idle_gpu_with_memory_to_spare_asks_for_a_larger_batch() -> None:
    o = observe(
        step_data_wait_pct=10.0,
        gpu_sm_active_pct=35.0,
        gpu_util_pct=47.0,
        gpu_mem_used_bytes=1 * GiB,
        gpu_tensor_active_pct=0.5,
        precision="fp32",
    )
    assert headline(o) == "gpu.larger_batch"
    assert "larger_batch" not in headline(observe(gpu_sm_active_pct=35.0))  # memory is not spare


def test_pageable_copies_of_big_batches_ask_for_pinned_memory() -> None:
    assert "copies.pageable" in [f.id for f in rules.findings(observe(pin_memory=False))]
    small = observe(pin_memory=False, batch_bytes=4096)
    assert "copies.pageable" not in [f.id for f in rules.findings(small)]


def test_sync_sites_are_named_with_file_and_line() -> None:
    sites = ({"file": "/x/demos/resnet.py", "line": 104, "op": "torch.unique(labels)", "count": 1},)
    finding = next(
        f for f in rules.findings(observe(syncs_per_step=4, sync_sites=sites)) if f.id == "syncs"
    )
    assert "resnet.py:104 torch.unique(labels)" in " ".join(finding.evidence)
    assert "syncs" not in [f.id for f in rules.findings(observe(syncs_per_step=1))]


def test_idle_tensor_cores_in_fp32_ask_for_amp_but_not_in_bf16() -> None:
    fp32 = observe(gpu_tensor_active_pct=0.4, gpu_sm_active_pct=70.0, precision="fp32")
    assert "gpu.tensor_cores_idle" in [f.id for f in rules.findings(fp32)]
    bf16 = observe(gpu_tensor_active_pct=0.4, gpu_sm_active_pct=70.0, precision="bf16")
    assert "gpu.tensor_cores_idle" not in [f.id for f in rules.findings(bf16)]
    waiting = replace(fp32, steps=replace(fp32.steps, data_wait_pct=40.0))
    assert "gpu.tensor_cores_idle" not in [f.id for f in rules.findings(waiting)]


def test_a_busy_main_thread_and_an_idle_gpu_is_launch_bound() -> None:
    o = observe(gpu_sm_active_pct=40.0, main_cpu_pct=100.0, gpu_mem_used_bytes=60 * GiB)
    assert headline(o) == "cpu.launch_bound"
    assert "cpu.launch_bound" not in [f.id for f in rules.findings(observe(main_cpu_pct=40.0))]


def test_memory_near_the_limit_is_flagged() -> None:
    assert "gpu.memory_near_limit" in [
        f.id for f in rules.findings(observe(gpu_mem_used_bytes=77 * GiB))
    ]


def test_nothing_is_said_before_there_are_steps() -> None:
    assert rules.findings(observe(step_steps=0)) == []
    assert rules.findings(None) == []


def test_mfu_uses_the_dense_peak_of_the_gpu_and_precision() -> None:
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.5
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 494.5  # TF32 convolutions
    assert peak_tflops("NVIDIA H100 PCIe", "fp32") == 378.0
    assert peak_tflops("Some Future GPU", "bf16") is None
    achieved = achieved_tflops(5.5e9, 16_000.0)
    assert achieved == pytest.approx(88.0)
    assert mfu_pct(achieved, 989.5) == pytest.approx(8.9, abs=0.05)
    assert efficiency(replace(observe(), gpu_name="unknown"))[1] is None  # unknown GPU: N/A
