"""Plain-data views of a snapshot (for JSON output, the recorder's summary and tests)."""

from __future__ import annotations

from typing import Any

from .advise.mfu import efficiency
from .advise.rules import Finding, findings
from .session.model import Snapshot


def status_fields(snap: Snapshot) -> dict[str, Any]:
    """The JSON object of one interval (documented in docs/headless.md); None is N/A."""
    steps, gpu, procs = snap.steps, snap.gpu, snap.procs
    achieved, mfu = efficiency(snap.observation)
    return {
        "type": "status",
        "phase": snap.phase,
        "t": round(snap.t, 3),
        "elapsed_s": round(snap.elapsed_s, 3),
        "job_running": snap.job.running,
        "total_steps": snap.total_steps,
        "total_samples": snap.total_samples,
        "window_s": snap.window_s,
        "steps_per_s": _round(steps.steps_per_s, 3),
        "samples_per_s": _round(steps.samples_per_s, 1),
        "step_ms_p50": _round(steps.step_ms_p50, 2),
        "step_ms_p95": _round(steps.step_ms_p95, 2),
        "data_wait_pct": _round(steps.data_wait_pct, 1),
        "data_wait_source": snap.observation.data_wait_source if snap.observation else "hook",
        "stacks": vars(snap.stacks) if snap.stacks else None,
        "gpu_time_pct": _round(steps.gpu_time_pct, 1),
        "gpu_util_pct": _round(gpu.util_pct, 1),
        "sm_active_pct": _round(gpu.sm_active_pct, 1),
        "tensor_active_pct": _round(gpu.tensor_active_pct, 1),
        "gpu_mem_used_bytes": gpu.mem_used_bytes,
        "gpu_mem_total_bytes": gpu.mem_total_bytes,
        "gpu_power_w": _round(gpu.power_w, 1),
        "workers": procs.workers,
        "workers_cpu_pct": _round(procs.workers_cpu_pct, 1),
        "main_cpu_pct": _round(procs.main_cpu_pct, 1),
        "syncs_per_step": snap.observation.syncs_per_step if snap.observation else None,
        "achieved_tflops": _round(achieved, 2),
        "mfu_pct": _round(mfu, 2),
        "findings": [finding_dict(f) for f in findings(snap.observation)],
        "advice_wait": snap.advice_wait,
        "autopilot": snap.autopilot,
    }


def finding_dict(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "title": finding.title,
        "evidence": list(finding.evidence),
        "action": finding.action,
        "expected_gain": finding.expected_gain,
        "confidence": finding.confidence,
        "changes": [{"role": c.role, "value": c.value} for c in finding.changes],
        "rules_out": list(finding.rules_out),
    }


def phase_dicts(snap: Snapshot) -> list[dict[str, Any]]:
    """The phase table for JSON output."""
    return [
        {
            "phase": row.phase.index,
            "change": row.phase.change,
            "failed": row.phase.failed,
            "first_step": row.phase.first_step,
            "steps": row.steps,
            "warmup_steps": row.warmup_steps,
            "warmup_s": _round(row.warmup_s, 2),
            "samples_per_s": _round(row.samples_per_s, 1),
            "step_ms_p50": _round(row.step_ms_p50, 2),
            "data_wait_pct": _round(row.data_wait_pct, 1),
            "gpu_util_pct": _round(row.gpu_util_pct, 1),
            "tensor_active_pct": _round(row.tensor_active_pct, 1),
            "peak_mem_bytes": row.peak_mem_bytes,
            "speedup": _round(row.speedup, 3),
            "headline": headline_id(row.observation),
            "findings": [finding_dict(f) for f in findings(row.observation)],
        }
        for row in snap.phases
    ]


def headline_id(observation: Any) -> str:
    top = findings(observation)
    return top[0].id if top else "N/A"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


TRIAL_COLUMNS = ("change", "from", "baseline", "samples/s", "gain", "needed", "decision")


def trial_rows(autopilot: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """The autopilot's (or --try's) trial table as text cells, one row per change tried."""
    rows = []
    for trial in (autopilot or {}).get("trials") or ():
        rows.append(
            (
                str(trial.get("change")),
                str(trial.get("source")),
                _rate(trial.get("baseline_samples_per_s"), trial.get("baseline_phase")),
                _rate(trial.get("samples_per_s"), trial.get("phase")),
                _times(trial.get("gain")),
                _times(trial.get("needed_gain")),
                f"{trial.get('decision')}: {trial.get('reason')}",
            )
        )
    return rows


def _rate(value: Any, phase: Any) -> str:
    rate = "N/A" if value is None else f"{value:,.0f}"
    return f"{rate} (phase {phase})" if phase is not None else rate


def _times(value: Any) -> str:
    return "N/A" if value is None else f"{value:.2f}x"
