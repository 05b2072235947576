"""One view per snapshot: the advice, efficiency, phase headlines and formatted figures of
that instant, computed once and shown alike by the TUI, headless output, the recording and
the summary (so the record says what the screen said). Plain-data serialisers too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import format as fmt
from . import wire
from .advise import stragglers
from .advise.mfu import Efficiency, efficiency, over_phases
from .advise.rules import Finding, findings
from .advise.stall import stall_finding
from .session import gpu_table
from .session.breakdown import PART_NAMES, StepParts, activations, cache
from .session.job_gpus import GpuFigures
from .session.model import Snapshot
from .session.phases import WARMUP_S, WARMUP_STEPS, PhaseRow
from .session.snapshot import Activity
from .session.stats import GpuStats, RankStats


@dataclass(frozen=True)
class PhaseView:
    """A phase row and the advisor's findings over its measured steps."""

    row: PhaseRow
    findings: tuple[Finding, ...]
    efficiency: Efficiency
    # The phase's throughput and its speed-up over the first phase's: the autopilot's settled
    # figure where it judged the phase (the ledger's), else the row's measured steps'.
    samples_per_s: float | None = None
    speedup: float | None = None

    @property
    def headline(self) -> str:
        return self.findings[0].id if self.findings else fmt.NA


@dataclass(frozen=True)
class Figures:
    """The live figures as text, with their units; N/A where not measured."""

    samples_per_s: str
    steps_per_s: str
    step_p50: str
    step_p95: str
    data_wait: str
    gpu_time: str
    gpu_util: str
    sm_active: str
    tensor_active: str
    gpu_mem: str
    syncs: str
    mfu: str
    tflops: str
    tokens_per_s: str = fmt.NA
    breakdown: str = fmt.NA  # "data 40% | forward 20% | ..." or N/A with its reason
    memory: str = fmt.NA  # the memory audit in words, or N/A


@dataclass(frozen=True)
class View:
    """What every front end shows of one snapshot."""

    snap: Snapshot
    findings: tuple[Finding, ...]
    achieved_tflops: float | None
    mfu_pct: float | None
    phases: tuple[PhaseView, ...]
    figures: Figures
    efficiency: Efficiency

    @property
    def headline(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def view_of(snap: Snapshot) -> View:
    if snap.activity is not None:  # the snapshot the front ends draw says it in words
        snap = replace(snap, activity_note=activity_note(snap.activity))
    phases = _phase_views(snap)
    measure = over_phases(efficiency(snap.observation, snap.steps), [p.efficiency for p in phases])
    achieved, mfu = measure.achieved_tflops, measure.mfu_pct
    advice = [_after_trials(f, snap.autopilot) for f in findings(snap.observation)]
    return View(
        snap=snap,
        findings=tuple(_stalled(snap) + advice),
        achieved_tflops=achieved,
        mfu_pct=mfu,
        phases=phases,
        figures=_figures(snap, achieved, mfu),
        efficiency=measure,
    )


def activity_note(activity: Activity | None) -> str | None:
    """In words, what the job is doing while it has made no step (None: nothing to say)."""
    a = activity
    if a is None:
        return None
    if not a.running:
        ended = "ended" if a.exit_code in (0, None) else f"failed (exit {a.exit_code})"
        return f"the job {ended} before any training step"
    if a.hooked:
        pids = ", ".join(str(pid) for pid in a.hooked)
        return (
            f"PID {pids} is hooked (it iterated a DataLoader) but has made no "
            f"optimizer.step() in {a.elapsed_s:.0f} s: the hook counts a step at each one"
        )
    if a.stacks_due_s is not None:
        return (
            f"sampling the training thread with py-spy: the first window comes in "
            f"{a.stacks_due_s:.0f} s (no hook: no step times)"
        )
    if a.stacks_shown:
        return None  # py-spy's window is on screen
    if a.refused is not None:
        pid, reason = a.refused
        return (
            f"PID {pid} is hooked but its hook turned this monitor away ({reason}); "
            "asking again every few seconds"
        )
    return (
        f"waiting for the first training step ({a.elapsed_s:.0f} s): the hook starts at the "
        "first DataLoader batch or optimizer.step() of a process that imports torch"
    )


def _phase_views(snap: Snapshot) -> tuple[PhaseView, ...]:
    """Each phase with its findings, and one throughput: where the autopilot judged the phase,
    its settled figure, so the phase table and the ledger read one figure for one phase
    (issue 46: 1.24x in the table beside 0.72x in the ledger)."""
    judged = pilot_rates(snap.autopilot)
    rates = [judged.get(row.phase.index, row.samples_per_s) for row in snap.phases]
    first = next((rate for rate in rates if rate), None)
    return tuple(
        PhaseView(
            row,
            tuple(findings(row.observation)),
            efficiency(row.observation),
            rate,
            rate / first if rate and first else None,
        )
        for row, rate in zip(snap.phases, rates, strict=True)
    )


def pilot_rates(autopilot: dict[str, Any] | None) -> dict[int, float]:
    """The settled samples/s the autopilot judged each phase on (a trial's and its
    baseline's), by phase; none where its rates are steps/s (the job's samples unknown)."""
    if not isinstance(autopilot, dict) or autopilot.get("unit", "samples/s") != "samples/s":
        return {}
    rates: dict[int, float] = {}
    for trial in _dicts(autopilot.get("trials")):
        for phase, rate in (
            (trial.get("baseline_phase"), trial.get("baseline_samples_per_s")),
            (trial.get("phase"), trial.get("samples_per_s")),
        ):
            figure = _number(rate)
            if isinstance(phase, int) and figure:
                rates[phase] = figure
    return rates


def _after_trials(finding: Finding, autopilot: dict[str, Any] | None) -> Finding:
    """A finding whose change the autopilot measured and took back says so, with what it
    measured, and promises no gain (issue 46: "up to 2.4x" stood beside a revert at 0.98x)."""
    if not isinstance(autopilot, dict):
        return finding
    mine = [t for t in _dicts(autopilot.get("trials")) if t.get("source") == finding.id]
    last = mine[-1] if mine else None
    if last is None or last.get("decision") not in ("reverted", "failed"):
        return finding
    gain = _number(last.get("gain"))
    measured = f"measured {gain:.2f}x" if gain is not None else "not measured"
    said = f"{last.get('change')} {measured} and {last.get('decision')} (autopilot)"
    return replace(
        finding,
        expected_gain=said,
        action=f"{finding.action}; the autopilot tried {said}: {last.get('reason')}",
    )


def _stalled(snap: Snapshot) -> list[Finding]:
    """A stalled job's finding, from its stall dump (monitor/stall.py), while it lasts."""
    if not snap.job.running:
        return []
    found = stall_finding(snap.readings.get("stall"))
    return [found] if found else []


def _figures(snap: Snapshot, achieved: float | None, mfu: float | None) -> Figures:
    steps, gpu = snap.steps, snap.gpu
    observation = snap.observation
    syncs = observation.syncs_per_step if observation is not None else None
    return Figures(
        samples_per_s=fmt.rate(steps.samples_per_s, "").strip(),
        steps_per_s=fmt.rate(steps.steps_per_s, "").strip(),
        step_p50=fmt.ms(steps.step_ms_p50),
        step_p95=fmt.ms(steps.step_ms_p95),
        data_wait=_data_wait_text(steps.data_wait_pct, steps.host_gap_pct),
        gpu_time=fmt.pct(steps.gpu_time_pct),
        gpu_util=fmt.pct(gpu.util_pct),
        sm_active=fmt.pct(gpu.sm_active_pct),
        tensor_active=fmt.pct(gpu.tensor_active_pct),
        gpu_mem=fmt.mem_pair(gpu.mem_used_bytes, gpu.mem_total_bytes),
        syncs=fmt.NA if syncs is None else f"{syncs}/step",
        mfu=fmt.pct(mfu),
        tflops=_tflops_text(achieved),
        tokens_per_s=fmt.rate(steps.tokens_per_s, "").strip(),
        breakdown=breakdown_text(steps.parts, parts_reason(snap)),
        memory=memory_text(snap.memory),
    )


def _data_wait_text(data_wait_pct: float | None, host_gap_pct: float | None) -> str:
    """The DataLoader's wait; where there is none, the host gap before each forward."""
    if data_wait_pct is None and host_gap_pct is not None:
        return f"{fmt.pct(host_gap_pct)} (host gap)"
    return fmt.pct(data_wait_pct)


def parts_reason(snap: Snapshot) -> str | None:
    return snap.step_parts_fact.reason if snap.step_parts_fact else None


_PART_LABELS = {
    "data": "data",
    "forward": "fwd",
    "backward": "bwd",
    "optimizer": "opt",
    "rest": "rest",
}


def data_part_label(parts: StepParts) -> str:
    """What the data part measures. On the GPU's clock it is the GPU's gap before its
    forward (the input copy, and waiting for a host busy elsewhere), not the host's wait on
    the DataLoader, which is data-wait: "data 91% (DataLoader)" beside "data-wait 0%" read as
    a contradiction (issue 39)."""
    if parts.clock == "gpu":
        return "data: the GPU's gap before forward"
    return f"data: {parts.data_source}"


def breakdown_text(parts: StepParts | None, reason: str | None) -> str:
    """The step's parts as shares, their clock and what the data part is; N/A with why."""
    if parts is None:
        return f"{fmt.NA}: {reason}" if reason else fmt.NA
    shares = " ".join(f"{_PART_LABELS[k]} {fmt.pct(parts.pct[k])}" for k in PART_NAMES)
    source = data_part_label(parts) if parts.pct["data"] is not None else ""
    return f"{shares} ({parts.clock} clock{', ' + source if source else ''})"


def rank_split_text(r: RankStats) -> str:
    """A rank's step split in ms: "data 1.2 fwd 20.3 bwd 31.0 opt 0.4 rest 0.9 ms (host
    clock); comm 29.1 ms" (comm: its wait in collectives, within its forward and backward)."""
    comm = f"; comm {fmt.ms(r.comm.wait_ms_p50)}" if r.comm is not None else ""
    parts = r.steps.parts
    if parts is None:
        return f"split {fmt.NA}{comm}"
    ms = " ".join(
        f"{_PART_LABELS[k]} {fmt.NA if parts.ms[k] is None else f'{parts.ms[k]:.1f}'}"
        for k in PART_NAMES
    )
    return f"split {ms} ms ({parts.clock} clock){comm}"


def memory_text(audit: wire.MemoryAudit | None) -> str:
    if audit is None:
        return fmt.NA
    return (
        f"peak {fmt.size(audit.allocated_peak)} = params {fmt.size(audit.params_bytes)} + "
        f"grads {fmt.size(audit.grads_bytes)} + optimizer {fmt.size(audit.optimizer_bytes)} + "
        f"activations {fmt.size(activations(audit))}; cache {fmt.size(cache(audit))}; "
        f"retries {_count(audit.alloc_retries)}, OOMs {_count(audit.ooms)}"
    )


def _count(value: int | None) -> str:
    return fmt.NA if value is None else str(value)


def breakdown_dict(parts: StepParts | None, reason: str | None) -> dict[str, Any]:
    """The step breakdown for JSON: a share and a mean ms per part (None: not observed)."""
    if parts is None:
        return {"clock": None, "reason": reason}
    out: dict[str, Any] = {
        "clock": parts.clock,
        "data_source": parts.data_source,
        "steps": parts.steps,
        "step_ms": _round(parts.step_ms, 3),
    }
    for name in PART_NAMES:
        out[f"{name}_pct"] = _round(parts.pct[name], 1)
        out[f"{name}_ms"] = _round(parts.ms[name], 3)
    out["reason"] = reason
    return out


def memory_dict(audit: wire.MemoryAudit | None) -> dict[str, Any] | None:
    """The memory audit for JSON (bytes); None before the first (or without CUDA)."""
    if audit is None:
        return None
    return {
        "params_bytes": audit.params_bytes,
        "grads_bytes": audit.grads_bytes,
        "optimizer_bytes": audit.optimizer_bytes,
        "activations_bytes": activations(audit),
        "allocated_peak_bytes": audit.allocated_peak,
        "reserved_peak_bytes": audit.reserved_peak,
        "cache_bytes": cache(audit),
        "device_total_bytes": audit.device_total,
        "alloc_retries": audit.alloc_retries,
        "ooms": audit.ooms,
    }


def _tflops_text(achieved: float | None) -> str:
    """Three significant figures; under a GFLOP/s (a small model on the CPU) "<0.001", where
    "9.66e-09" read as noise in a panel (the JSON keeps the figure)."""
    if achieved is None:
        return fmt.NA
    return "<0.001" if achieved < 0.001 else f"{achieved:.3g}"


def warmup_caption() -> str:
    """What the phase tables leave out, in words made from the rule's own constants (a change
    of the rule changes every table's caption)."""
    return f"warm-up excluded: the first {WARMUP_STEPS} steps and {WARMUP_S:g} s of each phase"


def steps_text(total: int, before: int, samples: int | None = None) -> str:
    """The steps and samples a duration covers: from an attach, those since it (both), with
    the job's own step numbers (which start at the job's start, not the monitor's). Before,
    the samples counted the ring of steps the hook sent from before the attach too: an attach
    summary counted three ways (issue 39)."""
    counted = f"{samples:,} samples" if samples is not None else f"{fmt.NA} samples"
    if before <= 0 or before > total:
        return f"{total} steps, {counted}"
    return (
        f"{total - before} steps and {counted} since the attach "
        f"(the job's steps {before + 1}-{total})"
    )


# -- serialisers (headless JSON, the summary) -------------------------------------------------


def _behind(snap: Snapshot) -> dict[str, Any] | None:
    """How far behind the job the monitor reads it, while it is (monitor/hook_client.py)."""
    behind = snap.readings.get("behind") or {}
    return behind if behind.get("s") else None


def status_fields(view: View) -> dict[str, Any]:
    """The JSON object of one interval (documented in docs/headless.md); None is N/A."""
    snap = view.snap
    steps, gpu, procs = snap.steps, snap.gpu, snap.procs
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
        **job_gpu_fields(gpu),
        "workers": procs.workers,
        "workers_cpu_pct": _round(procs.workers_cpu_pct, 1),
        "main_cpu_pct": _round(procs.main_cpu_pct, 1),
        "syncs_per_step": snap.observation.syncs_per_step if snap.observation else None,
        "achieved_tflops": _significant(view.achieved_tflops),
        "mfu_pct": _significant(view.mfu_pct),
        "mfu": efficiency_fields(view.efficiency),
        "tokens_per_s": _round(steps.tokens_per_s, 1),
        "host_gap_pct": _round(steps.host_gap_pct, 1),
        "step_parts": breakdown_dict(steps.parts, parts_reason(snap)),
        "timed_model": snap.step_parts_fact.model if snap.step_parts_fact else None,
        "memory": memory_dict(snap.memory),
        "ranks": rank_dicts(snap),
        "job_gpus": job_gpus_dict(snap),
        "gpus": gpu_dicts(snap),
        "findings": [finding_dict(f) for f in view.findings],
        "advice_wait": snap.advice_wait,
        "autopilot": snap.autopilot,
        "behind": _behind(snap),
        "knobs": knob_dicts(snap),
    }


def efficiency_fields(e: Efficiency) -> dict[str, Any]:
    """How the MFU was reached (docs/headless.md): the FLOP counts, the peaks, the reason."""
    return {
        "source": e.source,
        "flops_per_step_measured": _significant(e.measured_flops),
        "flops_per_step_analytic": _significant(e.analytic_flops),
        "disagreement_pct": _round(e.disagreement_pct, 1),
        "disagrees": e.disagrees,
        "scaled_by": _round(e.scaled_by, 3),
        "precision": e.precision,
        "peak_datasheet_tflops": e.datasheet_tflops,
        "peak_measured_tflops": _significant(e.measured_peak_tflops),
        "na_reason": e.reason,
        "gpus": e.gpus,
        "ranks": e.ranks,
        "per_gpu_tflops": _significant(e.per_gpu_tflops),
    }


def job_gpus_dict(snap: Snapshot) -> dict[str, Any] | None:
    """Which GPUs the job's figures are over, and why (session/job_gpus.py)."""
    job = snap.job_gpus
    if job is None:
        return None
    return {
        "indices": list(job.indices),
        "assumed": job.assumed,
        "reason": job.reason,
        "processes_listed": job.processes_listed,
    }


def gpu_dicts(snap: Snapshot) -> list[dict[str, Any]]:
    """Every GPU over the window (docs/headless.md): the job's (``job``: true) and the
    others, each with the ranks on it and the processes that are not the job's."""
    return [gpu_dict(g) for g in snap.gpus]


def job_gpu_fields(gpu: GpuStats) -> dict[str, Any]:
    """The job's GPU figures at the JSON's top level, by ``gpu_table.JOB_FIELDS``."""
    return {
        row.job_json: gpu_table.rounded(row, getattr(gpu, row.name))
        for row in gpu_table.JOB_FIELDS
        if row.job_json
    }


def gpu_dict(g: GpuFigures) -> dict[str, Any]:
    """One GPU in ``gpus[]``: who it is, the job's share, a key per row of
    ``gpu_table.GPU_FIELDS`` (its JSON name and rounding there), and the others on it."""
    return {
        "index": g.index,
        "uuid": g.uuid,
        "name": g.name,
        "job": g.job,
        "ranks": list(g.ranks),
        "pids": list(g.pids),
        "job_mem_bytes": g.job_mem_bytes,
        **{
            row.json_name: gpu_table.rounded(row, getattr(g, row.name))
            for row in gpu_table.GPU_FIELDS
        },
        "others": [
            {
                "pid": u.pid,
                "user": u.user,
                "command": u.command,
                "mem_bytes": u.mem_bytes,
                "sm_pct": _round(u.sm_pct, 1),
            }
            for u in g.others
        ],
    }


def knob_dicts(snap: Snapshot) -> list[dict[str, Any]]:
    """The knobs in force: the script's, then the hook's built-in ones (docs/knobs.md)."""
    return [
        {
            "name": k.name,
            "value": k.value,
            "builtin": k.builtin,
            "role": k.role,
            "unavailable": k.unavailable,
            "numerics": k.numerics,
            "error": k.error,
        }
        for k in sorted(snap.knobs, key=lambda k: k.builtin)
    ]


def rank_dicts(snap: Snapshot) -> list[dict[str, Any]]:
    """Each hooked process's own figures over the window (several under torchrun)."""
    return [
        {
            "rank": r.who.rank,
            "local_rank": r.who.local_rank,
            "pid": r.who.pid,
            "host": r.who.host,
            "gpus": list(r.gpus),
            "steps": r.steps.steps,
            "step_ms_p50": _round(r.steps.step_ms_p50, 2),
            "step_ms_p95": _round(r.steps.step_ms_p95, 2),
            "data_wait_pct": _round(r.steps.data_wait_pct, 1),
            "gpu_time_pct": _round(r.steps.gpu_time_pct, 1),
            "samples_per_s": _round(r.steps.samples_per_s, 1),
            "tokens_per_s": _round(r.steps.tokens_per_s, 1),
            "total_steps": r.total_steps,
            "total_samples": r.total_samples,
            **_comm_dict(r),
            "host_gap_pct": _round(r.steps.host_gap_pct, 1),
            "input_ms": _round(stragglers.input_ms(r), 2),
            "step_parts": breakdown_dict(r.steps.parts, None),
        }
        for r in snap.ranks
    ]


def _comm_dict(r: RankStats) -> dict[str, Any]:
    """A rank's wait in collectives (docs/ranks.md); None where not measured."""
    comm = r.comm
    return {
        "comm_ms_p50": _round(comm.wait_ms_p50, 2) if comm else None,
        "comm_ms_mean": _round(comm.wait_ms_mean, 2) if comm else None,
        "comm_pct": _round(comm.wait_pct, 1) if comm else None,
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
        "rank": finding.rank,  # the rank a straggler or stall names (docs/ranks.md)
        "ranks": list(finding.ranks or (() if finding.rank is None else (finding.rank,))),
    }


def phase_dicts(view: View) -> list[dict[str, Any]]:
    """The phase table for JSON output."""
    return [
        {
            "phase": p.row.phase.index,
            "change": p.row.phase.change,
            "failed": p.row.phase.failed,
            "first_step": p.row.phase.first_step,
            "steps": p.row.steps,
            "warmup_steps": p.row.warmup_steps,
            "warmup_s": _round(p.row.warmup_s, 2),
            "measured_s": _round(p.row.measured_s, 2),
            "samples_per_s": _round(p.samples_per_s, 1),
            "step_ms_p50": _round(p.row.step_ms_p50, 2),
            "data_wait_pct": _round(p.row.data_wait_pct, 1),
            "gpu_util_pct": _round(p.row.gpu_util_pct, 1),
            "tensor_active_pct": _round(p.row.tensor_active_pct, 1),
            "peak_mem_bytes": p.row.peak_mem_bytes,
            "speedup": _round(p.speedup, 3),
            "achieved_tflops": _significant(p.efficiency.achieved_tflops),
            "mfu_pct": _significant(p.efficiency.mfu_pct),
            "headline": p.headline,
            "findings": [finding_dict(f) for f in p.findings],
        }
        for p in view.phases
    ]


TRIAL_COLUMNS = (
    "change",
    "from",
    "predicted",
    "baseline",
    "samples/s",
    "gain",
    "needed",
    "vs start",
    "decision",
)


def trial_rows(autopilot: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """The autopilot's (or --try's) trial table as text cells, one row per change tried."""
    rows: list[tuple[str, ...]] = []
    for trial in (autopilot or {}).get("trials") or ():
        rows.append(
            (
                str(trial.get("change")),
                str(trial.get("source")),
                _times(trial.get("predicted_gain")),
                _rate(trial.get("baseline_samples_per_s"), trial.get("baseline_phase"))
                + _per_step(trial),
                _rate(trial.get("samples_per_s"), trial.get("phase")) + _per_step(trial),
                _times(trial.get("gain")),
                _times(trial.get("needed_gain")),
                _times(trial.get("gain_vs_start")),
                f"{trial.get('decision')}: {trial.get('reason')}" + _settled_note(trial),
            )
        )
    return rows


def _settled_note(trial: dict[str, Any]) -> str:
    """How the trial's window opened (autopilot/settle.py), where it was measured."""
    return f" ({trial['settled']})" if trial.get("settled") else ""


def ledger_lines(autopilot: dict[str, Any] | None) -> list[str]:
    """The autopilot's ledger in plain lines (docs/autopilot.md, "The ledger"): start -> end,
    the kept rungs with their predicted and settled gains, the reverted ones and why, the
    edits left with their expected gains, and the command line that replays the result. A
    recording's fields are read as they come: a value of the wrong type reads N/A."""
    if not isinstance(autopilot, dict) or autopilot.get("mode") != "autopilot":
        return []
    unit = autopilot.get("unit") or "samples/s"
    start = _number(autopilot.get("start_samples_per_s"))
    end = _number(autopilot.get("end_samples_per_s"))
    lines = []
    if start is not None:
        overall = f" ({end / start:.2f}x, both settled)" if start and end else ""
        lines.append(f"start -> end: {_figure(start)} -> {_figure(end)} {unit}{overall}")
    for trial in _dicts(autopilot.get("trials")):
        decision = trial.get("decision")
        if decision == "kept":
            lines.append(
                f"kept {trial.get('change')} (from {trial.get('source')}): predicted "
                f"{_times(_number(trial.get('predicted_gain')))}, settled "
                f"{_times(_number(trial.get('gain')))}" + _settled_note(trial)
            )
        elif decision in ("reverted", "failed", "refused"):
            lines.append(f"{decision} {trial.get('change')}{_phases(trial)}: {trial.get('reason')}")
    for edit in _dicts(autopilot.get("edits_left")):
        gain = edit.get("expected_gain") or "gain not estimated"
        lines_in = edit.get("lines")
        places = [str(x) for x in lines_in if x] if isinstance(lines_in, (list, tuple)) else []
        where = f" [{'; '.join(places)}]" if places else ""
        lines.append(f"edit left: {edit.get('finding')} ({gain}): {edit.get('action')}{where}")
    if autopilot.get("replay"):
        lines.append(f"replay: {autopilot['replay']}")
    return lines


def _phases(trial: dict[str, Any]) -> str:
    """Which phase a trial measured against which: the phase table's rows of the figures."""
    phase, baseline = trial.get("phase"), trial.get("baseline_phase")
    return f" (phase {phase} against phase {baseline})" if phase and baseline else ""


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The dicts of a list (a recording's) or tuple (the live status's); none of anything else."""
    if not isinstance(value, (list, tuple)):
        return []
    return [item for item in value if isinstance(item, dict)]


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    return float(value) if ok else None


def _figure(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _per_step(trial: dict[str, Any]) -> str:
    """Rates in steps/s (a job whose samples are unknown) say so."""
    return " steps/s" if trial.get("unit") == "steps/s" else ""


def _rate(value: Any, phase: Any) -> str:
    # a few steps/s keep their digits
    rate = fmt.NA if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return f"{rate} (phase {phase})" if phase is not None else rate


def _times(value: Any) -> str:
    return fmt.NA if value is None else f"{value:.2f}x"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _significant(value: float | None, digits: int = 3) -> float | None:
    """Three significant figures: a small model's 0.004 TFLOP/s must not read 0.0."""
    return None if value is None else float(f"{value:.{digits}g}")


def behind_text(snap: Snapshot) -> str:
    """ "412 steps behind the job (8.2 s)" while the monitor reads the job's frames late (a busy
    box: monitor/hook_client.py), else nothing: the figures shown are that old. The TUI's
    header and the headless status say it alike."""
    late = snap.readings.get("behind") or {}
    if not late.get("s"):
        return ""
    return f"{late.get('steps')} steps behind the job ({late['s']:g} s)"
