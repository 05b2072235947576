"""The session summary: Markdown and JSON, and an SVG chart with the phase boundaries."""

from __future__ import annotations

import html
import json
import socket
from pathlib import Path
from typing import Any

from .. import format as fmt
from .. import tables
from ..session.model import Session, Snapshot
from ..views import (
    TRIAL_COLUMNS,
    finding_dict,
    ledger_lines,
    phase_dicts,
    status_fields,
    steps_text,
    trial_rows,
    view_of,
    warmup_caption,
)
from .files import describe_os_error, write_private

CHART_BUCKETS = 240


def whole_run(session: Session) -> Snapshot:
    """A snapshot whose window is the whole session."""
    return session.snapshot(window_s=session.clock() - session.started_at + 1.0, with_phases=True)


def summarize(session: Session, meta: dict[str, Any]) -> dict[str, Any]:
    view = view_of(whole_run(session))
    snap = view.snap
    ticks = session.gpu_ticks()
    energy = [sum(g.energy_j for g in t if g.energy_j is not None) for t in ticks if t]
    energy_j = energy[-1] - energy[0] if len(energy) > 1 and energy[-1] >= energy[0] else None
    # The job's GPUs (session.gpu_ticks): the fullest one's memory, never a sum over GPUs.
    mem = [
        max((g.mem_used_bytes for g in t if g.mem_used_bytes is not None), default=0)
        for t in ticks
        if t
    ]
    power = [sum(g.power_w for g in t if g.power_w is not None) for t in ticks if t]
    achieved, mfu = view.achieved_tflops, view.mfu_pct
    syncs = snap.observation.sync_sites if snap.observation else ()
    return {
        "command": list(snap.command),
        "host": meta.get("host") or socket.gethostname(),
        "gpus": list(snap.gpu_names),
        "driver": session.driver,
        "started_at": snap.started_at,
        "duration_s": round(snap.elapsed_s, 1),
        "steps_before_start": snap.steps_before_start,  # made before an attach
        "figures": status_fields(view),
        "gpu_mem_peak_bytes": max(mem) if mem else None,
        "gpu_power_mean_w": round(sum(power) / len(power), 1) if power else None,
        "gpu_energy_j": round(energy_j, 1) if energy_j is not None else None,
        "achieved_tflops": float(f"{achieved:.3g}") if achieved is not None else None,
        "mfu_pct": round(mfu, 2) if mfu is not None else None,
        "phases": phase_dicts(view),
        "findings": [finding_dict(f) for f in view.findings],
        "sync_sites": list(syncs),
        "exit_code": snap.job.exit_code,
        "notices": list(snap.notices[-20:]),
    }


def _gpu_lines(figures: dict[str, Any]) -> list[str]:
    """On a node of several GPUs, each one's figures over the run: the job's, then the
    others with who used them (docs/gpus.md)."""
    gpus = figures.get("gpus") or []
    if len(gpus) < 2:
        return []
    job = figures.get("job_gpus") or {}
    lines = ["", "## GPUs (whole run, NVML)", ""]
    if job:
        assumed = " (assumed)" if job.get("assumed") else ""
        lines += [f"The job's GPUs{assumed}: {fmt.spans(job['indices'])}, {job['reason']}.", ""]
    lines += [
        "| GPU | job's | ranks | util | SM | tensor | memory | power | SM clock | throttle "
        "| other processes |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for g in gpus:
        others = ", ".join(
            f"PID {o['pid']} {o['user'] or fmt.NA} {_gib(o['mem_bytes'])} SM {fmt.pct(o['sm_pct'])}"
            for o in g["others"]
        )
        lines.append(
            f"| {g['index']} | {'yes' if g['job'] else 'no'} | {_ranks_on(g)} "
            f"| {fmt.pct(g['util_pct'])} | {fmt.pct(g['sm_active_pct'])} "
            f"| {fmt.pct(g['tensor_active_pct'])} "
            f"| {fmt.mem_pair(g['mem_used_bytes'], g['mem_total_bytes'])} "
            f"| {_with_unit(g['power_w'], 'W')} | {_with_unit(g['sm_clock_mhz'], 'MHz')} "
            f"| {', '.join(g['throttle'] or ()) or '-'} | {others or '-'} |"
        )
    return lines


def _ranks_on(gpu: dict[str, Any]) -> str:
    """The ranks on a GPU; "job" for a job of one process without a rank on it."""
    return fmt.spans(gpu["ranks"]) or ("job" if gpu["pids"] else "-")


def _mfu_basis(mfu: dict[str, Any] | None) -> str:
    """The FLOP count the figure uses, and why MFU is N/A where it is."""
    if not mfu:
        return ""
    parts = [f"FLOPs {mfu['source']}"] if mfu.get("source") else []
    if mfu.get("disagrees"):
        parts.append(f"the measured count differs by {mfu['disagreement_pct']:+.0f}%")
    if mfu.get("na_reason"):
        parts.append(f"MFU N/A: {mfu['na_reason']}")
    return f" ({'; '.join(parts)})" if parts else ""


def markdown(summary: dict[str, Any], chart_name: str | None = None) -> str:
    f = summary["figures"]
    samples = f["total_samples"]
    lines = [
        f"# gputop-train session: `{' '.join(summary['command'])}`",
        "",
        f"- host {summary['host']}, GPUs: "
        f"{', '.join(g or 'N/A' for g in summary['gpus']) or 'N/A'}"
        f" (driver {summary['driver'] or 'N/A'})",
        f"- duration {fmt.duration(summary['duration_s'])}, "
        f"{steps_text(f['total_steps'], summary.get('steps_before_start') or 0, samples)}, "
        f"exit code {summary['exit_code'] if summary['exit_code'] is not None else 'N/A'}",
        f"- throughput {fmt.rate(f['samples_per_s'], 'samples/s')}; step p50 "
        f"{fmt.ms(f['step_ms_p50'])}, p95 {fmt.ms(f['step_ms_p95'])} (whole run, hook)",
        f"- data-wait {fmt.pct(f['data_wait_pct'])} of "
        f"{_wait_basis(f.get('data_wait_source'))}; GPU time "
        f"{fmt.pct(f['gpu_time_pct'])}",
        f"- GPU utilization {fmt.pct(f['gpu_util_pct'])} (NVML mean), SM activity "
        f"{fmt.pct(f['sm_active_pct'])}, tensor activity {fmt.pct(f['tensor_active_pct'])} (GPM)",
        f"- GPU memory peak {_gib(summary['gpu_mem_peak_bytes'])}; power "
        f"{_with_unit(summary['gpu_power_mean_w'], 'W')} mean; energy "
        f"{_with_unit(summary['gpu_energy_j'], 'J')} (NVML)",
        f"- {_with_unit(summary['achieved_tflops'], 'TFLOP/s')} achieved, "
        f"MFU {fmt.pct(summary['mfu_pct'])}{_mfu_basis(f.get('mfu'))}",
        *_step_lines(f),
    ]
    if chart_name:
        lines += ["", f"![samples/s and GPU utilization over time]({chart_name})"]
    lines += [
        "",
        "## Phases",
        "",
        warmup_caption().capitalize() + ".",
        "",
        *_phase_table(summary["phases"]),
    ]
    lines += _gpu_lines(summary["figures"])
    ranks = summary["figures"].get("ranks") or []
    if len(ranks) > 1:
        lines += ["", "## Ranks (whole run)", ""]
        # The collective wait's column where any rank measured it (a hook that times them).
        comm = any(r.get("comm_ms_p50") is not None for r in ranks)
        lines += [
            "| rank | PID | host | GPU | steps | step p50 | data-wait | samples/s |"
            + (" comm wait p50 |" if comm else "")
            + " split data/fwd/bwd/opt/rest (ms) |"
        ]
        lines += ["|---|---:|---|---|---:|---:|---:|---:|" + ("---:|" if comm else "") + "---|"]
        lines += [
            f"| {_or_na(r['rank'])} | {r['pid']} | {_or_na(r['host'])} "
            f"| {fmt.gpus(r.get('gpus') or ()) or fmt.NA} | {r['total_steps']} "
            f"| {fmt.ms(r['step_ms_p50'])} | {fmt.pct(r['data_wait_pct'])} "
            f"| {fmt.rate(r['samples_per_s'], '').strip()} |"
            + (f" {fmt.ms(r.get('comm_ms_p50'))} |" if comm else "")
            + f" {_split(r.get('step_parts'))} |"
            for r in ranks
        ]
    autopilot = summary["figures"].get("autopilot")
    if autopilot:
        lines += ["", f"## {autopilot['mode'].capitalize()}: {autopilot['state']}", ""]
        lines += ["| " + " | ".join(TRIAL_COLUMNS) + " |", "|---" * len(TRIAL_COLUMNS) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in trial_rows(autopilot)]
        ledger = ledger_lines(autopilot)
        if ledger:
            lines += ["", "### Ledger", "", *(f"- {_code_replay(line)}" for line in ledger)]
    phases = summary["phases"]
    # The advisor judges the current phase past its warm-up (session/observe.py): with one
    # phase that is the whole run, with several it is the last one.
    span = f"phase {phases[-1]['phase']}, the last" if len(phases) > 1 else "whole run"
    lines += ["", f"## Findings ({span}, warm-up excluded)", ""]
    if not summary["findings"]:
        why = summary["figures"].get("advice_wait") or f"no rule fired over the {span}"
        lines.append(f"- none: {why}")
    for finding in summary["findings"]:
        lines.append(f"- **{finding['title']}** — {finding['action']}")
        lines += [f"  - {e}" for e in finding["evidence"]]
    if summary["sync_sites"]:
        lines += ["", "## Host-device sync sites (last scan)", ""]
        lines += [
            f"- `{s['file']}:{s['line']}` `{s['op']}` x{s['count']}" for s in summary["sync_sites"]
        ]
    return "\n".join(lines) + "\n"


def _code_replay(line: str) -> str:
    """The replay command as code, so Markdown leaves its quotes and asterisks alone."""
    head, colon, command = line.partition("replay: ")
    return f"replay: `{command}`" if colon and not head else line


def _gib(value: int | None) -> str:
    """A size in GiB, or N/A alone (never "N/A GiB")."""
    return f"{fmt.gib(value)} GiB" if value else fmt.NA


def _phase_table(phases: list[dict[str, Any]]) -> list[str]:
    """The phase table (tables.PHASE_COLUMNS, every column, each change whole) in Markdown,
    with each phase's headline finding."""
    columns = tables.PHASE_COLUMNS
    lines = ["| " + " | ".join((*(c.header for c in columns), "headline finding")) + " |"]
    lines.append("|" + "".join("---:|" if c.right else "---|" for c in columns) + "---|")
    for p in map(tables.PhaseLine.of_dict, phases):
        lines.append("| " + " | ".join((*(c.cell(p) for c in columns), p.headline)) + " |")
    return lines


def svg_chart(session: Session, width: int = 900, height: int = 300) -> str:
    """samples/s (hook) and GPU utilization (NVML) over time, phase boundaries marked."""
    snap = whole_run(session)
    charts = session.snapshot(
        window_s=1.0, chart_window_s=max(1.0, snap.elapsed_s + 1.0), chart_points=CHART_BUCKETS
    ).charts
    assert charts is not None
    pad, plot_w, plot_h = 50, width - 100, height - 70
    start = snap.t - charts.window_s

    def points(values: tuple[float | None, ...], top: float) -> str:
        coords = []
        for i, v in enumerate(values):
            if v is not None and top > 0:
                x = pad + plot_w * (i + 0.5) / len(values)
                y = 30 + plot_h * (1 - min(1.0, v / top))
                coords.append(f"{x:.1f},{y:.1f}")
        return " ".join(coords)

    top = max((v for v in charts.samples_per_s if v is not None), default=1.0) * 1.1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<rect x="{pad}" y="30" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>',
        f'<text x="{pad}" y="18" fill="#1f77b4">samples/s (hook, left axis, max {top:.0f})</text>',
        f'<text x="{pad + 420}" y="18" fill="#2ca02c">GPU utilization % (NVML, right axis)</text>',
        f'<polyline fill="none" stroke="#2ca02c" stroke-width="1.5" '
        f'points="{points(charts.gpu_util_pct, 100.0)}"/>',
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" '
        f'points="{points(charts.samples_per_s, top)}"/>',
    ]
    for row in snap.phases[1:]:
        steps = [s for s in session.steps() if s.step == row.phase.first_step]
        t = steps[0].t if steps else row.phase.started_at
        x = pad + plot_w * (t - start) / charts.window_s
        parts.append(
            f'<line x1="{x:.1f}" y1="30" x2="{x:.1f}" y2="{30 + plot_h}" '
            f'stroke="#d62728" stroke-dasharray="4,3"/>'
        )
        label = html.escape(f"{row.phase.index}: {row.phase.change}"[:28])
        parts.append(
            f'<text x="{x + 3:.1f}" y="{44 + 14 * (row.phase.index % 4)}" '
            f'fill="#d62728" font-size="10">{label}</text>'
        )
    parts.append(f'<text x="{pad}" y="{height - 20}">0 s</text>')
    parts.append(f'<text x="{pad + plot_w - 60}" y="{height - 20}">{charts.window_s:.0f} s</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_all(
    session: Session, meta: dict[str, Any], recording: Path
) -> tuple[list[Path], list[str]]:
    """Markdown, JSON and SVG next to the recording, each private and written without
    following a symlink: the paths written, and what could not be (and why)."""
    stem = recording.with_suffix("")
    chart, md, js = (Path(f"{stem}.{ext}") for ext in ("svg", "summary.md", "summary.json"))
    summary = summarize(session, meta)
    written, problems = [], []
    for path, text in (
        (md, markdown(summary, chart.name)),
        (js, json.dumps(summary, indent=2)),
        (chart, svg_chart(session)),
    ):
        try:
            write_private(path, text)
            written.append(path)
        except OSError as error:
            problems.append(f"summary not written: {describe_os_error(error, path)}")
    return written, problems


def _with_unit(value: object, unit: str) -> str:
    """A figure and its unit (0 included), or N/A alone: never "N/A W"."""
    return fmt.NA if value is None else f"{value} {unit}"


def _step_lines(f: dict[str, Any]) -> list[str]:
    """Tokens/s, the step breakdown and the memory audit (docs/steps.md); summaries written
    before these figures existed show N/A."""
    parts = f.get("step_parts") or {}
    if parts.get("clock"):
        shares = ", ".join(
            f"{name} {fmt.pct(parts.get(f'{name}_pct'))} ({fmt.ms(parts.get(f'{name}_ms'))})"
            for name in ("data", "forward", "backward", "optimizer", "rest")
        )
        breakdown = f"{shares}; {parts['clock']} clock, data from {parts.get('data_source')}"
    else:
        breakdown = f"N/A{': ' + parts['reason'] if parts.get('reason') else ''}"
    memory = f.get("memory")
    audit = "N/A (no audit: CPU job or too short)"
    if memory:
        audit = (
            f"peak {fmt.size(memory['allocated_peak_bytes'])}: parameters "
            f"{fmt.size(memory['params_bytes'])}, gradients {fmt.size(memory['grads_bytes'])}, "
            f"optimizer state {fmt.size(memory['optimizer_bytes'])}, activations and "
            f"temporaries {fmt.size(memory['activations_bytes'])}; allocator cache "
            f"{fmt.size(memory['cache_bytes'])}; {_or_na(memory['alloc_retries'])} allocation "
            f"retries, {_or_na(memory['ooms'])} OOMs"
        )
    return [
        f"- tokens {fmt.rate(f.get('tokens_per_s'), 'tokens/s')} (whole run, hook)",
        f"- step breakdown: {breakdown}",
        f"- GPU memory audit: {audit}",
    ]


def _split(parts: dict | None) -> str:
    """A rank's step split from its JSON (views.breakdown_dict): "1.0/20.2/31.0/0.4/0.9 host"."""
    if not parts or parts.get("clock") is None:
        return fmt.NA
    names = ("data", "forward", "backward", "optimizer", "rest")
    values = [parts.get(f"{name}_ms") for name in names]
    return "/".join(fmt.NA if v is None else f"{v:.1f}" for v in values) + f" {parts['clock']}"


def _or_na(value: object) -> str:
    """A figure as it is (0 included), N/A only when unmeasured."""
    return fmt.NA if value is None else str(value)


def _wait_basis(source: str | None) -> str:
    """The hook's data-wait is a share of step time; py-spy's, of the thread's samples."""
    return "the training thread's py-spy samples (no hook)" if source == "py-spy" else "step time"
