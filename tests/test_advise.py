"""Each rule on synthetic observations that must, and must not, trigger it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_train import wire
from gputop_train.advise import rules
from gputop_train.advise.mfu import efficiency, peak_tflops
from gputop_train.session.stats import Observation
from gputop_train.session.workload import Workload
from tests.support.observations import (
    BF16_H100,
    FP32_H100,
    IMAGENET_4_WORKERS,
    RUNG0,
    GiB,
    headline,
    ids,
    observe,
)


def test_a_gpu_bound_step_is_called_healthy() -> None:
    assert headline(observe()).id == "gpu.bound"


def test_no_workers_and_a_long_wait_asks_for_workers() -> None:
    finding = headline(observe(**RUNG0))
    assert finding.id == "input.more_workers"
    assert "75%" in finding.evidence[0] and "num_workers to 8" in finding.action
    assert finding.changes == (rules.Change("workers", 8),)


def test_busy_workers_with_idle_cores_ask_for_workers_toward_the_idle_cores() -> None:
    finding = headline(observe(**IMAGENET_4_WORKERS))
    assert finding.id == "input.more_workers"
    # 30% of 16 cores busy: 11.2 idle, the training process's share counted; 4 + 11 = 15.
    assert finding.changes == (rules.Change("workers", 15),)
    assert "11.2 of 16 cores free to the job" in " ".join(finding.evidence)
    assert "will not help" not in finding.action
    assert all("workers" not in f.rules_out for f in rules.findings(observe(**IMAGENET_4_WORKERS)))


def test_busy_workers_and_no_idle_core_rule_out_more_workers_with_the_evidence() -> None:
    o = observe(**{**IMAGENET_4_WORKERS, "workers": 12, "system_cpu_pct": 97.0})
    finding = headline(o)
    assert finding.id == "input.gpu_preprocessing"  # float images: GPU work, else uint8
    assert finding.changes == (
        rules.Change("input_format", "gpu"),
        rules.Change("input_format", "uint8"),
    )
    assert "input.more_workers" not in ids(o)
    assert finding.rules_out == ("workers",) and "will not help" in finding.action
    assert "0.5 of 16 cores free to the job" in " ".join(finding.evidence)  # the claim's evidence


def test_one_busy_worker_per_core_is_saturation_whatever_the_idle_share_reads() -> None:
    # 16 workers at 82% on the 16-core H200 box, 2 cores read idle: 32 workers ran 0.88x.
    busy = {"workers": 16, "worker_cpu_pct": 82.0, "system_cpu_pct": 87.0, "model": BF16_H100}
    o = observe(**{**IMAGENET_4_WORKERS, **busy})
    finding = headline(o)
    assert finding.id == "input.gpu_preprocessing" and finding.rules_out == ("workers",)
    assert "16 workers on 16 cores: one per core already" in " ".join(finding.evidence)


def test_more_workers_than_cores_on_a_saturated_machine_are_not_spare_capacity() -> None:
    # 8 workers sharing 2 cores read about 20% each: contention, not workers waiting.
    saturated = {"workers": 8, "worker_cpu_pct": 21.0, "system_cpu_pct": 99.0, "main_cpu_pct": 95}
    o = observe(**{**IMAGENET_4_WORKERS, **saturated}, cpu_count=2)
    assert headline(o).id == "input.gpu_preprocessing"
    assert not {"input.main_process", "input.idle_workers", "input.more_workers"} & set(ids(o))


def test_busy_uint8_pipeline_with_no_core_left_asks_for_gpu_preprocessing() -> None:
    o = observe(
        **{**IMAGENET_4_WORKERS, "workers": 15, "system_cpu_pct": 99.0, "batch_dtype": "uint8"}
    )
    assert headline(o).id == "input.gpu_preprocessing"
    assert headline(o).changes == (rules.Change("input_format", "gpu"),)


def test_tensors_that_are_not_images_never_get_image_advice() -> None:
    o = observe(
        **{**IMAGENET_4_WORKERS, "workers": 16, "system_cpu_pct": 98.0, "batch_shape": (256, 512)}
    )
    assert headline(o).id == "input.cpu_bound"
    assert "uint8" not in headline(o).action and headline(o).changes == ()


def test_a_busy_training_process_with_workers_to_spare_is_its_own_case() -> None:
    o = observe(
        **{**IMAGENET_4_WORKERS, "workers": 8, "worker_cpu_pct": 35.0, "main_cpu_pct": 104.0}
    )
    finding = headline(o)
    assert finding.id == "input.main_process"
    assert "input.more_workers" not in ids(o)
    assert "104%" in " ".join(finding.evidence) and "they wait" in " ".join(finding.evidence)
    # Workers wait, yet twice as many gained 1.07-1.10x (docs/advisor.md): little, not nothing.
    assert finding.rules_out == () and "more workers add little" in finding.action
    uint8, gpu = rules.Change("input_format", "uint8"), rules.Change("input_format", "gpu")
    assert finding.changes == (uint8, gpu)
    # Already uint8 (the demo on the H200 after its uint8 trial): smaller images next.
    assert headline(replace(o, batch_dtype="torch.uint8")).changes == (gpu,)


@pytest.mark.parametrize(("epochs", "restarts"), [(3, True), (1, False)])
def test_idle_workers_blame_restarts_only_when_epochs_restarted_in_the_window(
    epochs: int, restarts: bool
) -> None:
    # A single epoch's worker start-up once read as "started anew at every epoch".
    o = observe(
        **{
            **RUNG0,
            "step_data_wait_pct": 40.0,
            "workers": 2,
            "worker_cpu_pct": 4.0,
            "main_cpu_pct": 50.0,
        },
        cpu_count=2,
        persistent_workers=False,
        epochs=epochs,
    )
    finding = headline(o)
    assert finding.id == "input.idle_workers"
    assert ("persistent_workers=True" in finding.action) is restarts
    assert not {"input.more_workers", "input.uint8", "input.gpu_preprocessing"} & set(ids(o))


def test_a_cpu_job_is_never_told_the_gpu_waits_or_given_gpu_fixes() -> None:
    # The CPU run: no GPU and a dataset of tensors drew "the GPU waits for data"
    # and "send uint8 images (PILToTensor)".
    cpu = wire.Model(cuda=False, autocast="off", param_dtype="float32", compiled=False)
    tensors = {**IMAGENET_4_WORKERS, "workers": 2, "system_cpu_pct": 99.0, "model": cpu}
    o = observe(**{**tensors, "batch_shape": (64, 128)}, gpu_name=None, cpu_count=2)
    found = rules.findings(o)
    assert found[0].id == "input.cpu_bound" and found[0].changes == ()
    text = " ".join(f.title + f.action for f in found)
    assert "GPU" not in text and "uint8" not in text
    assert not {"copies.pageable", "gpu.mixed_precision", "gpu.larger_batch"} & set(ids(o))
    images = observe(**tensors, gpu_name=None, cpu_count=2)  # float images on the CPU
    assert headline(images).id == "input.uint8" and "GPU" not in headline(images).action


def test_a_wait_on_data_is_ignored_while_the_gpu_is_saturated() -> None:
    assert "input.more_workers" not in ids(observe(step_data_wait_pct=8.0))


def test_an_idle_gpu_with_memory_to_spare_asks_for_a_larger_batch() -> None:
    o = observe(
        step_data_wait_pct=10.0,
        gpu_sm_active_pct=35.0,
        gpu_util_pct=47.0,
        gpu_mem_used_bytes=1 * GiB,
        step_gpu_time_pct=40.0,
    )
    assert headline(o).id == "gpu.larger_batch"
    assert "gpu.larger_batch" not in ids(observe(gpu_sm_active_pct=35.0))  # memory is not spare


def test_pageable_copies_of_big_batches_ask_for_pinned_memory() -> None:
    assert "copies.pageable" in ids(observe(pin_memory=False))
    assert "copies.pageable" not in ids(observe(pin_memory=False, batch_bytes=4096))


def test_sync_sites_are_named_with_file_and_line() -> None:
    sites = ({"file": "/x/demos/resnet.py", "line": 104, "op": "torch.unique(labels)", "count": 1},)
    finding = next(
        f for f in rules.findings(observe(syncs_per_step=4, sync_sites=sites)) if f.id == "syncs"
    )
    assert "resnet.py:104 torch.unique(labels)" in " ".join(finding.evidence)
    assert finding.changes == (rules.Change("syncs", False),)
    assert "syncs" not in ids(observe(syncs_per_step=1))


def _syncs(o: Observation) -> rules.Finding:
    return next(f for f in rules.findings(o) if f.id == "syncs")


# grad_accum_no_loader on the H100 (2026-11-25): 8 .item() a step, NVML 24%, SM 11%, the
# training process at 98% CPU; removing the syncs gained 1.03x (docs/diagnosis.md).
LAUNCH_BOUND_SYNCS = dict(
    syncs_per_step=8,
    gpu_util_pct=24.0,
    gpu_sm_active_pct=11.0,
    gpu_mem_used_bytes=2 * GiB,
    main_cpu_pct=98.0,
    step_data_wait_pct=0.0,
)


def test_syncs_gain_no_more_than_the_gpus_busy_time_allows() -> None:
    # At 24% busy the host can wait at most 24% of the step: 1/(1-0.24) = 1.32x at most.
    launch_bound = observe(**LAUNCH_BOUND_SYNCS)
    finding = _syncs(launch_bound)
    assert finding.gain == pytest.approx(1 / 0.76)
    assert "GPU busy 24% of the time (NVML): syncs cost at most 1.32x" in finding.evidence
    # ... so more work per launch leads there (the H100's measured answer: the batch).
    assert headline(launch_bound).id == "gpu.larger_batch"
    # At 95% busy the GPU can fill at most 5% more: the syncs are worth 1.05x.
    assert _syncs(observe(syncs_per_step=8, gpu_util_pct=95.0)).gain == pytest.approx(1 / 0.95)
    # Half busy leaves the full estimate; sync_heavy_loss (NVML 56%, SM 25%) still leads with it.
    half = observe(**{**LAUNCH_BOUND_SYNCS, "gpu_util_pct": 56.0, "gpu_sm_active_pct": 25.0})
    assert _syncs(half).gain == rules.SYNCS_GAIN
    assert headline(half).id == "syncs"


def test_syncs_without_nvml_keep_their_estimate() -> None:
    finding = _syncs(observe(syncs_per_step=8, gpu_util_pct=None))
    assert finding.gain == rules.SYNCS_GAIN
    assert not any("NVML" in line for line in finding.evidence)


def test_fp32_on_a_busy_tensor_core_gpu_asks_for_mixed_precision_whatever_tf32_shows() -> None:
    # The ImageNet-style script with 16 workers in fp32 on the H100: GPU busy 97% of the
    # step, SM 63%, tensor activity 8% from TF32, and no finding at all before.
    transformer = replace(FP32_H100, tf32_cudnn=True, channels_last=None)  # no convolutions
    o = observe(
        model=transformer,
        step_gpu_time_pct=97.0,
        gpu_sm_active_pct=63.0,
        gpu_tensor_active_pct=8.0,
    )
    finding = headline(o)
    assert finding.id == "gpu.mixed_precision" and finding.gain == 2.0
    # cuDNN's TF32 flag is on, but matmuls run in full fp32 (precision "highest"): the
    # evidence says so, and TF32 matmuls are offered after bf16 (issue 26).
    assert finding.changes == (
        rules.Change("precision", "bf16"),
        rules.Change("matmul_precision", "high"),
    )
    evidence = " ".join(finding.evidence)
    assert "no autocast" in evidence and "matmuls full fp32" in evidence
    assert "TF32 on" not in evidence and "set_float32_matmul_precision" in finding.action


def test_an_nchw_convnet_on_tf32_asks_for_channels_last_before_mixed_precision() -> None:
    # ResNet-50 in fp32 on the H200: channels_last alone 1.39x, bf16 alone (NCHW) 1.10x.
    o = observe(model=FP32_H100, step_gpu_time_pct=100.0, gpu_sm_active_pct=86.0)
    assert headline(o).id == "gpu.channels_last" and "TF32" in headline(o).title
    amp = next(f for f in rules.findings(o) if f.id == "gpu.mixed_precision")
    assert amp.expected_gain == "up to 1.1x"


@pytest.mark.parametrize(
    "model",
    [
        BF16_H100,  # autocast on
        replace(FP32_H100, param_dtype="bfloat16"),  # pure bf16 training
        replace(FP32_H100, autocast=None),  # compiled: autocast unknown
        replace(FP32_H100, capability=[6, 1]),  # no tensor cores
        wire.Model(),  # no facts (a job without the hook)
    ],
)
def test_mixed_precision_needs_the_facts_that_prove_fp32(model: wire.Model) -> None:
    o = observe(model=model, step_gpu_time_pct=97.0, gpu_sm_active_pct=63.0)
    assert "gpu.mixed_precision" not in ids(o)


def test_a_gpu_timeline_full_of_gaps_is_not_a_busy_gpu() -> None:
    # The launch-bound MLP of the corpus on the H200: GPU time 100% of the step (CUDA events
    # span the gaps), SM activity 3%. fp32, yet precision is not what holds it back.
    o = observe(model=FP32_H100, step_gpu_time_pct=100.0, gpu_sm_active_pct=3.0)
    assert "gpu.mixed_precision" not in ids(o) and "gpu.channels_last" not in ids(o)


def test_mixed_precision_waits_while_the_gpu_waits_for_data_or_idles() -> None:
    waiting = observe(model=FP32_H100, step_data_wait_pct=40.0, step_gpu_time_pct=50.0)
    assert "gpu.mixed_precision" not in ids(waiting)
    idle = observe(model=FP32_H100, step_gpu_time_pct=30.0, gpu_sm_active_pct=20.0)
    assert "gpu.mixed_precision" not in ids(idle)
    v100 = observe(  # no TF32: AMP is what brings the tensor cores, NCHW or not
        model=replace(FP32_H100, capability=[7, 0]), step_gpu_time_pct=95.0, gpu_name="V100"
    )
    assert headline(v100).changes == (rules.Change("precision", "fp16"),)
    assert "gpu.channels_last" not in ids(v100)


def test_a_busy_convnet_under_amp_in_nchw_asks_for_channels_last() -> None:
    nchw = replace(BF16_H100, channels_last=False)
    assert headline(observe(model=nchw)).changes == (rules.Change("channels_last", True),)
    assert "gpu.channels_last" not in ids(observe())  # already channels_last
    no_convs = replace(BF16_H100, channels_last=None)  # no 4-D weights: not a convnet
    assert "gpu.channels_last" not in ids(observe(model=no_convs))
    no_tf32 = replace(FP32_H100, tf32_cudnn=False)  # fp32 convolutions off the tensor cores
    assert "gpu.channels_last" not in ids(observe(model=no_tf32))


def test_a_busy_main_thread_and_an_idle_gpu_is_launch_bound() -> None:
    o = observe(gpu_sm_active_pct=40.0, main_cpu_pct=100.0, gpu_mem_used_bytes=60 * GiB)
    assert headline(o).id == "cpu.launch_bound"
    assert headline(o).changes == (rules.Change("compile", "reduce-overhead"),)
    assert "cpu.launch_bound" not in ids(observe(main_cpu_pct=40.0))


def test_memory_near_the_limit_outranks_healthy() -> None:
    o = observe(gpu_mem_used_bytes=77 * GiB)
    assert headline(o).id == "gpu.memory_near_limit" and "gpu.bound" in ids(o)


def test_healthy_proposes_compile_only_when_the_model_is_not_compiled() -> None:
    assert headline(observe()).changes == ()
    uncompiled = observe(model=replace(BF16_H100, compiled=False))
    assert headline(uncompiled).changes == (rules.Change("compile", True),)


def test_nothing_is_said_without_an_observation() -> None:
    assert rules.findings(observe(step_steps=0)) == []
    assert rules.findings(None) == []


def test_mfu_uses_the_dense_peak_of_the_gpu_and_precision() -> None:
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.5
    assert peak_tflops("NVIDIA H100 80GB HBM3", "tf32") == 494.5
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 67.0  # CUDA cores
    assert peak_tflops("NVIDIA H100 PCIe", "tf32") == 378.0
    assert peak_tflops("Some Future GPU", "bf16") is None
    # 5.5 GFLOP per step at 10 steps/s: 55 GFLOP/s, whatever the samples.
    o = observe(flops_per_step=5.5e10, flops_per_sample=5.5e10 / 500)  # 500 samples a step
    assert efficiency(o).achieved_tflops == pytest.approx(0.55)
    assert efficiency(o).mfu_pct == pytest.approx(100 * 0.55 / 989.5)
    unknown = efficiency(replace(o, gpu_name="unknown"))  # unknown GPU: N/A with the reason
    assert unknown.mfu_pct is None and "no datasheet peak for unknown" in (unknown.reason or "")
    # An fp32 convnet's convolutions run on TF32 through cuDNN's default flag.
    convnet = replace(o, model=FP32_H100, workload=Workload(convolutions=53))
    assert efficiency(convnet).precision == "tf32"
    assert efficiency(convnet).mfu_pct == pytest.approx(100 * 0.55 / 494.5)


def test_no_workers_on_a_machine_with_no_idle_core_makes_no_claim_about_workers() -> None:
    # On the 2-core CI box the training process loaded on both cores (139% CPU) and 0 workers
    # beat 1, 2 and 3: more workers are not offered, nor ruled out without a worker to show it.
    o = observe(**{**RUNG0, "main_cpu_pct": 139.0, "system_cpu_pct": 75.0}, cpu_count=2)
    assert "input.more_workers" not in ids(o)
    assert headline(o).id == "input.gpu_preprocessing" and headline(o).rules_out == ()
    assert "will not help" not in headline(o).action
