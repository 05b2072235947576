"""Model FLOPs utilization: achieved FLOP/s against the GPU's dense peak at the precision the
step's matmuls actually run in, or N/A with the reason (never a figure that cannot be right).

Achieved TFLOP/s = FLOPs of one optimizer step x optimizer steps per second (the hook's step
ends, whatever the micro-batches or the samples), per rank, and for the job the sum over its
ranks; MFU = the job's achieved over (its GPUs x the per-GPU peak), so that N ranks on N
GPUs read what one does (issue 37). The FLOPs are the full model's whatever the sharding
(hook/workload.py counts a DTensor's global shape). The FLOPs are counted two ways by the hook
(hook/workload.py): measured, by FlopCounterMode over one whole step, and analytic, by the
transformer formula of nanoGPT and torchtitan (6N + 12 L H Q T per token). The analytic count
is shown where it exists (it is the MFU convention: model FLOPs, no recomputation, what the
trainers' own meters print); the measured one otherwise. They are compared, and a gap over
DISAGREEMENT_PCT is said with its likely causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..session.stats import Observation, StepStats

# Dense (no sparsity) peak TFLOP/s from NVIDIA's data sheets, per precision of the matmuls:
# "tf32" is fp32 on the tensor cores (PyTorch's float32_matmul_precision "high"/"medium",
# cuDNN's allow_tf32 for convolutions), "fp32" the plain CUDA cores ("highest", the default
# for matmuls). V100 has no TF32 or bf16.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "H100": {"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},  # SXM5 (80GB HBM3)
    "H200": {"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "L40S": {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0, "fp32": 91.6},
    "L4": {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
    "V100": {"fp16": 125.0, "fp32": 15.7},
}
# The two counts differ by more than this: said, with the causes (nanoGPT's formula and a
# FLOP counter agree within a few % on a plain GPT; recomputation adds a third, a compiled
# model's fused kernels escape the counter).
DISAGREEMENT_PCT = 15.0
ANALYTIC = "analytic: 6N + 12·L·H·Q·T per token (nanoGPT, torchtitan)"
MEASURED = "measured: FlopCounterMode over one step"


@dataclass(frozen=True)
class Efficiency:
    """What the MFU line shows; each figure None (N/A) with ``reason`` saying why."""

    achieved_tflops: float | None = None  # the job's: every rank's together
    mfu_pct: float | None = None
    gpus: int = 1  # the job's GPUs the peak is multiplied by
    ranks: int = 1  # the ranks the achieved TFLOP/s adds up
    source: str | None = None  # which FLOP count achieved_tflops uses
    measured_flops: float | None = None  # per optimizer step
    analytic_flops: float | None = None
    disagreement_pct: float | None = None  # analytic against measured, where both exist
    precision: str | None = None  # of the matmuls: bf16, fp16, tf32, fp32, fp8
    datasheet_tflops: float | None = None
    measured_peak_tflops: float | None = None  # the hook's matmul at the same precision
    reason: str | None = None  # why MFU (or everything) is N/A
    scaled_by: float | None = None  # the window's samples per step over the counted step's

    @property
    def disagrees(self) -> bool:
        return self.disagreement_pct is not None and abs(self.disagreement_pct) > DISAGREEMENT_PCT

    @property
    def per_gpu_tflops(self) -> float | None:
        """Achieved TFLOP/s per GPU of the job."""
        if self.achieved_tflops is None:
            return None
        return self.achieved_tflops / max(1, self.gpus)

    def notes(self) -> list[str]:
        """The lines that qualify the figure: the count used, a disagreement, the peaks."""
        lines = []
        if self.source:
            lines.append(f"FLOPs {self.source}")
        if self.achieved_tflops is not None and (self.gpus > 1 or self.ranks > 1):
            lines.append(
                f"{self.achieved_tflops:.1f} TFLOP/s over {self.ranks} ranks on {self.gpus} "
                f"GPUs: {self.per_gpu_tflops:.1f} per GPU; MFU over {self.gpus} GPUs' peak"
            )
        if self.scaled_by is not None:
            lines.append(
                f"the counted step's FLOPs scaled x{self.scaled_by:.3g} to the window's samples "
                "per step (the batch changed since the count)"
            )
        if self.disagrees:
            lines.append(
                f"the two FLOP counts disagree by {self.disagreement_pct:+.0f}% (analytic "
                f"{self.analytic_flops:.3g}, measured {self.measured_flops:.3g} per step): "
                "activation checkpointing recomputes, a compiled model's fused kernels escape "
                "the counter, non-transformer layers escape the formula"
            )
        if self.precision:
            datasheet = f"{self.datasheet_tflops:g}" if self.datasheet_tflops else "N/A"
            peak = f"peak {self.precision}: datasheet {datasheet} TFLOP/s"
            if self.measured_peak_tflops is not None:
                peak += f", measured matmul {self.measured_peak_tflops:.0f} TFLOP/s"
            lines.append(peak)
        if self.reason:
            lines.append(f"MFU N/A: {self.reason}")
        return lines


def peak_tflops(gpu_name: str | None, precision: str | None) -> float | None:
    """The dense peak for this GPU and matmul precision; None where unknown."""
    if not gpu_name or not precision:
        return None
    for model, peaks in PEAK_TFLOPS.items():  # most specific names come first
        if model in gpu_name:
            return peaks.get(precision)
    return None


def step_precision(o: Observation) -> str | None:
    """The precision the step's matmuls (or, in a convnet, convolutions) run in."""
    workload, facts = o.workload, o.model
    if workload.fp8_matmuls:
        return "fp8"
    precision = o.precision
    if precision != "fp32":
        return precision or workload.matmul_precision
    if workload.convolutions and not workload.transformer:
        return "tf32" if facts.tf32_cudnn else "fp32"  # cuDNN's flag governs convolutions
    if facts.tf32_matmul is None:
        return workload.matmul_precision
    return "tf32" if facts.tf32_matmul else "fp32"


def efficiency(o: Observation | None, rates: StepStats | None = None) -> Efficiency:
    """Achieved TFLOP/s and MFU of an observation, or N/A with the reason. ``rates``: the step
    figures the rate is taken from, where they are not the observation's own (a summary's
    whole run beside the advice's last window): TFLOP/s must go with the samples/s shown."""
    if o is None:
        return Efficiency(reason="no measured steps yet")
    steps = rates or o.steps
    ranks = job_ranks(o)
    gpus = job_gpu_count(o)
    scale = _batch_scale(o, steps, ranks)
    measured = o.flops_per_step * scale if o.flops_per_step else None
    analytic = o.workload.analytic_flops * scale if o.workload.analytic_flops else None
    flops = analytic if analytic else measured
    source = ANALYTIC if analytic else (MEASURED if measured else None)
    disagreement = 100.0 * (analytic - measured) / measured if analytic and measured else None
    steps_per_s = steps.steps_per_s
    precision = step_precision(o)
    datasheet = peak_tflops(o.gpu_name, precision) if o.uses_gpu else None
    measured_peak = o.workload.peak_tflops if o.workload.peak_precision == precision else None
    base = Efficiency(
        gpus=gpus,
        ranks=ranks,
        scaled_by=scale if scale != 1.0 else None,
        source=source,
        measured_flops=float(measured) if measured else None,
        analytic_flops=float(analytic) if analytic else None,
        disagreement_pct=disagreement,
        precision=precision if o.uses_gpu else None,
        datasheet_tflops=datasheet,
        measured_peak_tflops=measured_peak,
    )
    if not flops:
        note = o.workload.count_note or "the hook counts step 3"
        return _with(base, reason=f"FLOPs not counted yet ({note})")
    if not steps_per_s:
        return _with(base, reason="no step rate in the window")
    achieved = flops * steps_per_s * ranks / 1e12  # every rank runs the counted step
    base = _with(base, achieved_tflops=achieved)
    if not o.uses_gpu:
        return _with(base, reason="the job runs on the CPU")
    if precision == "fp8":
        return _with(base, reason="fp8 matmuls: the peak depends on the mix of fp8 and bf16")
    if precision is None:
        return _with(base, reason="the matmul precision is unknown (compiled autocast)")
    if datasheet is None:
        return _with(
            base, reason=f"no datasheet peak for {o.gpu_name or 'this GPU'} in {precision}"
        )
    mfu = 100.0 * achieved / (gpus * datasheet)
    if mfu > 100.0:
        return _with(
            base,
            reason=f"{mfu:.0f}% of the {precision} peak cannot be: the FLOP count or the "
            "precision is wrong for this step",
        )
    return _with(base, mfu_pct=mfu)


def over_phases(whole: Efficiency, phases: Sequence[Efficiency]) -> Efficiency:
    """A run's efficiency across its phases: the FLOPs per sample hold across them, so the
    whole run's TFLOP/s stands, but one MFU over phases whose matmuls ran at different
    precisions (fp32, then bf16) divides by a peak that held for part of the run only."""
    precisions = list(dict.fromkeys(p.precision for p in phases if p.precision))
    if len(precisions) < 2 or whole.mfu_pct is None:
        return whole
    return _with(
        whole,
        mfu_pct=None,
        reason=f"the matmul precision changed between phases ({', '.join(precisions)}): "
        "each phase has its own MFU",
    )


def job_ranks(o: Observation) -> int:
    """The ranks whose steps the window's rates add up (one for a single process)."""
    return max(1, len(o.ranks))


def job_gpu_count(o: Observation) -> int:
    """The job's GPUs: those it was seen on (session/job_gpus.py); before that, or where
    NVML cannot tell (no GPU figures), one per rank."""
    job = o.job_gpus
    if job is not None and not job.assumed and job.indices:
        return len(job.indices)
    return job_ranks(o)


def _batch_scale(o: Observation, steps: StepStats, ranks: int = 1) -> float:
    """A rank's samples per step in the window (samples/s is every rank's) over the counted
    step's, where both are known and differ by more than 1%; else 1. FLOPs are counted on
    one step: a batch changed since (a script that sizes its batch by trying, as the
    corpus's memory-limit loop does in its first steps, or a change nobody declared) scales
    them, accumulation or not."""
    if not (o.flops_per_step and o.flops_per_sample and steps.samples_per_s and steps.steps_per_s):
        return 1.0
    counted = o.flops_per_step / o.flops_per_sample
    window = steps.samples_per_s / steps.steps_per_s / ranks
    scale = window / counted if counted > 0 else 1.0
    return scale if abs(scale - 1.0) > 0.01 else 1.0


def _with(base: Efficiency, **changes: object) -> Efficiency:
    from dataclasses import replace

    return replace(base, **changes)  # type: ignore[arg-type]
