"""Text of the dashboard's panels, from one view: pure functions, easy to snapshot-test."""

from __future__ import annotations

from rich.text import Text

from ... import format as fmt
from ...samples import DATA_WAIT, GpuSample
from ...session.model import Snapshot
from ...session.phases import KnobState
from ...views import View

BAR_WIDTH = 10


def bar(fraction: float | None, width: int = BAR_WIDTH) -> Text:
    if fraction is None:
        return Text("·" * width, style="dim")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    style = "red" if fraction >= 0.9 else "yellow" if fraction >= 0.6 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def header(
    snap: Snapshot,
    job_pid: int | None,
    paused: bool,
    chart_window: str,
    replay_status: str | None = None,
) -> Text:
    gpus = _gpu_names(snap.gpu_names) or "no GPU (N/A)"
    if snap.job.running:
        state = Text("running", style="green")
    elif snap.job.exit_code == 0:
        state = Text("exited 0", style="bold")
    elif snap.job.exit_code is None:
        state = Text("ended", style="bold")
    else:
        state = Text(f"failed: exit {snap.job.exit_code}", style="bold red")
    text = Text.assemble(
        ("gputop-train │ ", "bold"),
        state,
        (
            f" {fmt.duration(snap.elapsed_s)} │ phase {snap.phase}"
            f" │ PID {job_pid if job_pid is not None else fmt.NA}",
            "",
        ),
    )
    if paused:
        text.append(" │ PAUSED", style="bold reverse")
    if replay_status:
        text.append(f" │ {replay_status}", style="bold magenta")
    text.append(f" │ {gpus} │ {' '.join(_short_command(snap.command))}")
    text.append(f" │ charts {chart_window}", style="dim")
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def _gpu_names(names: tuple[str | None, ...]) -> str:
    """ "2× NVIDIA H200": each model once, with its count."""
    models = sorted({n for n in names if n})
    return ", ".join(f"{names.count(m)}× {m}" if names.count(m) > 1 else m for m in models)


def _short_command(command: tuple[str, ...]) -> tuple[str, ...]:
    if command and command[0].rsplit("/", 1)[-1].startswith("python"):
        return ("python", *command[1:])
    return command


def steps_panel(view: View) -> Text:
    snap, f = view.snap, view.figures
    if snap.stacks is not None and not snap.hooked:
        return stacks_panel(snap)
    text = Text()
    text.append(f"Steps (hook, last {snap.window_s:g} s)\n", style="bold")
    rows = (
        ("samples/s", f.samples_per_s, "steps/s", f.steps_per_s),
        ("step p50", f.step_p50, "p95", f.step_p95),
        ("data-wait", f.data_wait, "GPU time", f.gpu_time),
        ("syncs", f.syncs, "steps", str(snap.total_steps)),
        ("MFU", f.mfu, "TFLOP/s", f.tflops),
    )
    for label, value, label2, value2 in rows:
        text.append(f" {label:<10}", style="dim")
        text.append(f"{value.strip():<9}")
        text.append(f" {label2:<8} ", style="dim")
        text.append(f"{value2.strip()}\n")
    if not snap.hooked:
        text.append(" waiting for the first training step…", style="italic dim")
    return text


def stacks_panel(snap: Snapshot) -> Text:
    """A job without the hook: where its training thread is, in py-spy's latest window."""
    stacks = snap.stacks
    assert stacks is not None
    shares = {name: fmt.pct(share) for name, share in stacks.shares.items()}
    text = Text()
    text.append(f"Training thread {stacks.thread}, py-spy\n", style="bold")
    rows = (
        ("data wait", shares[DATA_WAIT], "forward", shares["forward"]),
        ("backward", shares["backward"], "optimizer", shares["optimizer"]),
        ("other", shares["other"], "samples", str(stacks.samples)),
    )
    for label, value, label2, value2 in rows:
        text.append(f" {label:<10}", style="dim")
        text.append(f"{value.strip():<9}")
        text.append(f" {label2:<9} ", style="dim")
        text.append(f"{value2.strip()}\n")
    text.append(" no hook: step times N/A", style="italic dim")
    return text


def gpu_panel(snap: Snapshot) -> Text:
    text = Text()
    if snap.nvml_error:
        text.append("GPU (NVML)\n", style="bold")
        text.append(f" N/A: {snap.nvml_error}", style="yellow")
        return text
    if not snap.latest_gpus:
        return Text("GPU (NVML)\n waiting for the first sample…", style="dim")
    recent = snap.recent_util_pct
    for index, gpu in enumerate(snap.latest_gpus):
        util_pct = recent[index] if index < len(recent) else gpu.util_pct
        text.append_text(_one_gpu(gpu, util_pct))
    return text


def _one_gpu(gpu: GpuSample, util_pct: float | None) -> Text:
    text = Text()
    text.append(f"GPU{gpu.index} {gpu.name or ''}\n", style="bold")
    text.append(" util ", style="dim")
    text.append_text(bar(None if util_pct is None else util_pct / 100))
    text.append(f" {fmt.pct(util_pct):>4}\n")
    text.append(" GPM  SM ", style="dim")
    text.append(fmt.pct(gpu.sm_active_pct))
    text.append("  tensor ", style="dim")
    text.append(fmt.pct(gpu.tensor_active_pct) + "\n")
    used, total = gpu.mem_used_bytes, gpu.mem_total_bytes
    text.append(" mem  ", style="dim")
    text.append_text(bar(used / total if used is not None and total else None))
    text.append(f" {fmt.mem_pair(used, total)}\n")
    power = fmt.NA if gpu.power_w is None else f"{gpu.power_w:.0f}"
    limit = fmt.NA if gpu.power_limit_w is None else f"{gpu.power_limit_w:.0f}"
    temp = fmt.NA if gpu.temp_c is None else f"{gpu.temp_c:.0f}°C"
    clock = fmt.NA if gpu.sm_clock_mhz is None else f"{gpu.sm_clock_mhz:.0f} MHz"
    text.append(" pwr  ", style="dim")
    text.append(f"{power}/{limit} W  {temp}  SM {clock}")
    if gpu.throttle:
        text.append(f"  throttled: {','.join(gpu.throttle)}", style="yellow")
    text.append("\n")
    return text


def process_rows(snap: Snapshot) -> list[tuple[str, ...]]:
    """Rows of the process table; GPU memory and SM% matched to psutil PIDs through NVML."""
    gpu_mem: dict[int, int] = {}
    gpu_sm: dict[int, float] = {}
    for gpu in snap.latest_gpus:
        for proc in gpu.processes:
            if proc.mem_bytes is not None:
                gpu_mem[proc.pid] = gpu_mem.get(proc.pid, 0) + proc.mem_bytes
            if proc.sm_pct is not None:
                gpu_sm[proc.pid] = gpu_sm.get(proc.pid, 0.0) + proc.sm_pct
    order = {"main": 0, "launcher": 1, "worker": 2, "child": 3}
    ranks = {h.pid: h.rank for h in snap.hooked if h.rank is not None}
    rows: list[tuple[str, ...]] = []
    for p in sorted(
        snap.processes, key=lambda p: (order.get(p.role, 9), ranks.get(p.pid, -1), p.pid)
    ):
        rows.append(
            (
                str(p.pid),
                f"rank {ranks[p.pid]}" if p.pid in ranks else p.role,
                p.name[:16],
                fmt.pct(p.cpu_pct),
                fmt.gib(p.rss_bytes) + " GiB" if p.rss_bytes is not None else fmt.NA,
                fmt.bytes_rate(p.io_read_bps),
                fmt.bytes_rate(p.io_write_bps),
                p.status or fmt.NA,
                fmt.gib(gpu_mem[p.pid]) + " GiB" if p.pid in gpu_mem else fmt.NA,
                fmt.pct(gpu_sm.get(p.pid)),
            )
        )
    return rows


def process_table(snap: Snapshot) -> Text:
    """The process table as fixed-width text: cheap to redraw, copes with any width."""
    widths = (7, 9, 16, 6, 9, 10, 10, 9, 9, 5)
    text = Text(no_wrap=True, overflow="crop")
    header = "".join(f"{name:<{w}}" for name, w in zip(PROCESS_COLUMNS, widths, strict=True))
    text.append(header.rstrip() + "\n", style="bold reverse")
    for row in process_rows(snap):
        style = "" if row[1] != "worker" else "cyan"
        line = "".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True))
        text.append(line.rstrip() + "\n", style=style)
    if not snap.processes:
        text.append("no processes sampled yet", style="dim")
    return text


PROCESS_COLUMNS = (
    "PID",
    "role",
    "name",
    "CPU",
    "RSS",
    "read/s",
    "write/s",
    "state",
    "GPU mem",
    "SM",
)


def findings_panel(view: View) -> Text:
    """The headline finding: what holds the step back, the evidence, the next change."""
    top = view.findings
    text = Text("▶ ", style="bold")
    if not top:
        text.append("no findings: ", style="bold")
        text.append(view.snap.advice_wait or "no rule fired over the last window", style="dim")
        return text
    head = top[0]
    text.append(head.title, style="bold yellow" if head.id != "gpu.bound" else "bold green")
    text.append(f"  → {head.action}")
    if head.expected_gain:
        text.append(f" ({head.expected_gain})", style="cyan")
    text.append("\n  " + "; ".join(head.evidence), style="dim")
    if len(top) > 1:
        text.append("\n  also: " + "; ".join(f.title for f in top[1:3]), style="dim")
    return text


def knob_prompt(knob: KnobState, snap: Snapshot) -> Text:
    """One knob's line: value in force, and pending / warming-up / failed state."""
    value = ("on" if knob.value else "off") if knob.kind == "bool" else knob.value
    text = Text(f"{knob.name:<14}", style="bold")
    text.append(f"{value!s:<11}")
    if knob.pending is not None:
        text.append(f"→ {knob.pending} (pending: applies at the next step)", style="yellow")
    elif knob.error:
        text.append(f"✗ {knob.error}", style="red")
    elif _warming_up(knob, snap):
        busy = "compiling…" if knob.name == "compile" and knob.value else "warming up…"
        text.append(busy, style="cyan")
    else:
        text.append(knob.help, style="dim")
    return text


def _warming_up(knob: KnobState, snap: Snapshot) -> bool:
    if not snap.phases:
        return False
    last = snap.phases[-1]
    return last.phase.index > 1 and last.steps == 0 and knob.name in last.phase.change


def phase_table(snap: Snapshot) -> Text:
    """The phase table: one row per configuration, speed-up against the first phase."""
    text = Text("Phases ", style="bold")
    text.append("(warm-up excluded: first 5 steps and first 3 s of each phase)\n", style="dim")
    text.append(
        f"{'#':<3}{'change':<30}{'steps':>6}{'warm-up':>9}{'samples/s':>10}{'step p50':>10}"
        f"{'data-wait':>10}{'GPU util':>9}{'tensor':>7}{'peak mem':>10}{'speed-up':>9}\n",
        style="bold reverse",
    )
    for row in snap.phases:
        change = row.phase.change + (" ✗ reverted" if row.phase.failed else "")
        speedup = f"{row.speedup:.2f}x" if row.speedup else fmt.NA
        mem = f"{fmt.gib(row.peak_mem_bytes)} GiB" if row.peak_mem_bytes else fmt.NA
        warm = fmt.ms(row.warmup_s * 1000) if row.warmup_s else fmt.NA
        text.append(
            f"{row.phase.index:<3}{change[:29]:<30}{row.steps:>6}{warm:>9}"
            f"{fmt.rate(row.samples_per_s, '').strip():>10}{fmt.ms(row.step_ms_p50):>10}"
            f"{fmt.pct(row.data_wait_pct):>10}{fmt.pct(row.gpu_util_pct):>9}"
            f"{fmt.pct(row.tensor_active_pct):>7}{mem:>10}{speedup:>9}\n",
            style="red" if row.phase.failed else "",
        )
    return text


def autopilot_panel(snap: Snapshot) -> Text:
    """The autopilot's state, its next changes and its last decisions."""
    pilot = snap.autopilot
    out = Text("Autopilot ", style="bold")
    if not pilot:
        out.append(
            "off: press a to follow the advice on the knobs that declare a role",
            style="dim",
        )
        return out
    out.append(f"({pilot['mode']}) ", style="dim")
    out.append(str(pilot["state"]), style="" if pilot.get("done") else "cyan")
    if pilot.get("plan"):
        out.append("\n next: " + ", ".join(pilot["plan"][:4]), style="dim")
    marks = {"kept": ("✓", "green"), "reverted": ("✗", "yellow"), "failed": ("✗", "red")}
    for trial in list(pilot.get("trials") or ())[-6:]:
        mark, style = marks.get(trial["decision"], ("…", "cyan"))
        gain = fmt.NA if trial.get("gain") is None else f"{trial['gain']:.2f}x"
        out.append(f"\n {mark} {trial['change']:<24} {gain:>6} ", style=style)
        out.append(f"{trial['decision']}: {trial.get('reason') or ''}", style="dim")
    return out
