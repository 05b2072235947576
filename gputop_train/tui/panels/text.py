"""Text of the dashboard's panels, from one view: pure functions, easy to snapshot-test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text

from ... import format as fmt
from ...samples import DATA_WAIT, GpuSample
from ...session.model import Snapshot
from ...session.phases import KnobState
from ...session.stats import RankStats
from ...views import PHASE_COLUMNS, View, phase_figures, warmup_caption

BAR_WIDTH = 10


def bar(fraction: float | None, width: int = BAR_WIDTH) -> Text:
    if fraction is None:
        return Text("·" * width, style="dim")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    style = "red" if fraction >= 0.9 else "yellow" if fraction >= 0.6 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def job_state(snap: Snapshot) -> Text:
    """running / exited 0 / stopped (exit 130) / failed: exit 1 / ended."""
    job = snap.job
    if job.running:
        return Text("running", style="green")
    if job.stopped_by is not None:
        code = fmt.NA if job.exit_code is None else job.exit_code
        return Text(f"stopped (exit {code})", style="bold")
    if job.exit_code == 0:
        return Text("exited 0", style="bold")
    if job.exit_code is None:
        return Text("ended", style="bold")
    return Text(f"failed: exit {job.exit_code}", style="bold red")


def header(
    snap: Snapshot,
    job_pid: int | None,
    paused: bool,
    replay_status: str | None = None,
    width: int = 0,
) -> Text:
    """One line, most important first. Within ``width`` (0: no limit) by rule, never by a
    cut: the GPUs' "NVIDIA " and the command's path go first, then the title, then the
    command."""
    pid = job_pid if job_pid is not None else recorded_pid(snap)
    full, short = _gpu_names(snap.gpu_names), _gpu_names(snap.gpu_names, brand=False)
    command = _short_command(snap.command)
    script = next((Path(a).name for a in command if a.endswith(".py")), " ".join(command[:1]))
    variants = [
        (True, full or "no GPU (N/A)", " ".join(command)),
        (True, short or "no GPU", script),
        (False, short or "no GPU", script),
        (False, short or "no GPU", ""),
    ]
    for titled, gpus, shown in variants:
        text = Text("gputop-train │ " if titled else "", style="bold")
        if replay_status:
            text.append(f"{replay_status} │ ", style="bold magenta")
        text.append_text(job_state(snap))
        text.append(f" {fmt.duration(snap.elapsed_s)} │ phase {snap.phase}")
        if paused:
            text.append(" │ PAUSED", style="bold reverse")
        text.append(f" │ PID {pid if pid is not None else fmt.NA} │ {gpus}")
        if shown:
            text.append(f" │ {shown}")
        if not width or text.cell_len <= width:
            break
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def recorded_pid(snap: Snapshot) -> int | None:
    """The job's PID as its samples show it (a replay has no job of its own): the root of
    the sampled process tree (the sampler lists it first), else the first hooked process."""
    if snap.processes:
        return snap.processes[0].pid
    return snap.hooked[0].pid if snap.hooked else None


def _gpu_names(names: tuple[str | None, ...], brand: bool = True) -> str:
    """ "2× NVIDIA H200": each model once, with its count; "2× H200" without the brand."""
    models = sorted({n for n in names if n})
    shown = {m: m if brand else m.removeprefix("NVIDIA ") for m in models}
    return ", ".join(
        f"{names.count(m)}× {shown[m]}" if names.count(m) > 1 else shown[m] for m in models
    )


def _short_command(command: tuple[str, ...]) -> tuple[str, ...]:
    if command and command[0].rsplit("/", 1)[-1].startswith("python"):
        return ("python", *command[1:])
    return command


def steps_panel(view: View, width: int = 0) -> Text:
    snap, f = view.snap, view.figures
    if snap.stacks is not None and not snap.hooked:
        return stacks_panel(snap)
    text = Text()
    text.append(f"Steps (hook, last {snap.window_s:g} s)\n", style="bold")
    rows = (
        ("samples/s", f.samples_per_s, "steps/s", f.steps_per_s),
        ("tokens/s", f.tokens_per_s, "", ""),
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
    text.append_text(parts_bar(snap))
    if len(snap.ranks) > 1:
        _rank_rows(text, view, wide=width >= RANK_SPLIT_WIDTH)
    if snap.activity_note:
        text.append(f" {snap.activity_note}", style="italic dim")
    return text


# The step breakdown's stacked bar: one letter and colour per part (docs/steps.md).
PARTS_BAR_WIDTH = 30
_PART_STYLES = (
    ("data", "d", "yellow"),
    ("forward", "f", "cyan"),
    ("backward", "b", "blue"),
    ("optimizer", "o", "magenta"),
    ("rest", "·", "dim"),
)


def parts_bar(snap: Snapshot) -> Text:
    """The step's parts as one stacked bar and their shares; N/A with its reason."""
    parts = snap.steps.parts
    text = Text(f" {'step':<10}", style="dim")
    if parts is None:
        reason = (snap.step_parts_fact or {}).get("reason")
        text.append(f"parts {fmt.NA}{': ' + reason if reason else ''}\n", style="dim")
        return text
    for name, letter, style in _PART_STYLES:
        share = parts.pct[name]
        if share is not None:
            text.append(letter * round(share / 100.0 * PARTS_BAR_WIDTH), style=f"reverse {style}")
    text.append(f" {parts.clock}\n", style="dim")
    text.append(" " * 11)
    for name, letter, style in _PART_STYLES:
        label = "rest" if name == "rest" else letter
        text.append(f"{label} ", style=style)
        text.append(f"{fmt.pct(parts.pct[name])}  ")
    if parts.pct["data"] is not None:
        text.append(f"(data: {parts.data_source})", style="dim")
    text.append("\n")
    return text


RANK_ROWS_SHOWN = 4  # the panel's share of a 24-line screen; the JSON output has every rank
# A Steps panel this wide (a 200-column terminal's) shows each rank's step split beside its
# row: data, forward, backward, optimizer ms (docs/ranks.md); narrower, the JSON has it.
RANK_SPLIT_WIDTH = 72


def _rank_rows(text: Text, view: View, wide: bool = False) -> None:
    """Each rank's own step p50, data-wait and samples/s (``wide``: and its step split); a
    straggler named by the advisor stands out in red. With more ranks than rows, the ones that
    hold the job back are shown: the named straggler, then the longest data-wait and step
    time."""
    titles = [f.title for f in view.findings if f.id == "ranks.straggler"]

    def named(rank: RankStats) -> bool:
        return any(title.startswith(f"Straggler: {rank.label} ") for title in titles)

    ranks = view.snap.ranks
    shown = ranks
    if len(ranks) > RANK_ROWS_SHOWN:
        worst = sorted(
            ranks,
            key=lambda r: (
                not named(r),
                -(r.steps.data_wait_pct or 0.0),
                -(r.steps.step_ms_p50 or 0.0),
            ),
        )
        picked = set(map(id, worst[:RANK_ROWS_SHOWN]))
        shown = tuple(r for r in ranks if id(r) in picked)
    # The collective wait's column where a rank measured it; the row stays within 40 columns.
    comm = any(r.comm is not None for r in ranks)
    if comm:
        header = f" {'rank':<6}{'step p50':>9}{'data':>6}{'comm p50':>9}{'samp/s':>9}"
    else:
        header = f" {'rank':<8}{'step p50':>9}{'data-wait':>10}{'samples/s':>10}"
    split = wide and any(r.steps.parts is not None for r in shown)
    text.append(header + (_SPLIT_HEADER if split else "") + "\n", style="dim")
    for rank in shown:
        who = str(rank.who.rank) if rank.who.rank is not None else f"PID {rank.who.pid}"
        rate = fmt.rate(rank.steps.samples_per_s, "").strip()
        if comm:
            wait = fmt.ms(rank.comm.wait_ms_p50) if rank.comm else fmt.NA
            row = (
                f" {who:<6}{fmt.ms(rank.steps.step_ms_p50):>9}"
                f"{fmt.pct(rank.steps.data_wait_pct):>6}{wait:>9}{rate:>9}\n"
            )
        else:
            row = (
                f" {who:<8}{fmt.ms(rank.steps.step_ms_p50):>9}"
                f"{fmt.pct(rank.steps.data_wait_pct):>10}{rate:>10}\n"
            )
        if split:
            row = row.rstrip("\n") + _split_cells(rank) + "\n"
        text.append(row, style="bold red" if named(rank) else "")
    if len(ranks) > len(shown):
        text.append(f" +{len(ranks) - len(shown)} more ranks, the slowest shown (JSON: ranks)\n")


_SPLIT_HEADER = f"  {'data':>6}{'fwd':>7}{'bwd':>7}{'opt':>6} ms"


def _split_cells(rank: RankStats) -> str:
    """A rank's step split in ms (its own steps; N/A where not split), under _SPLIT_HEADER."""
    parts = rank.steps.parts
    cells = [None if parts is None else parts.ms.get(name) for name in _SPLIT_PARTS]
    widths = (8, 7, 7, 6)
    return "".join(
        f"{fmt.NA if v is None else f'{v:.1f}':>{w}}" for v, w in zip(cells, widths, strict=True)
    )


_SPLIT_PARTS = ("data", "forward", "backward", "optimizer")


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
    text.append_text(memory_audit(snap))
    return text


def memory_audit(snap: Snapshot) -> Text:
    """What the peak holds (the hook's audit); nothing before the first audit."""
    audit = snap.memory
    if audit is None:
        return Text()
    text = Text(" peak ", style="dim")
    text.append(
        f"{fmt.size(audit.allocated_peak)}: params {fmt.size(audit.params)}, grads "
        f"{fmt.size(audit.grads)}, optim {fmt.size(audit.optimizer)}, act "
        f"{fmt.size(audit.activations)}, cache {fmt.size(audit.cache)}\n"
    )
    retries = fmt.NA if audit.alloc_retries is None else str(audit.alloc_retries)
    ooms = fmt.NA if audit.ooms is None else str(audit.ooms)
    style = "yellow" if audit.alloc_retries or audit.ooms else ""
    text.append(" alloc retries ", style="dim")
    text.append(f"{retries}  OOMs {ooms}\n", style=style)
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
    gpu_of: dict[int, list[int]] = {}
    for gpu in snap.latest_gpus:
        for proc in gpu.processes:
            gpu_of.setdefault(proc.pid, []).append(gpu.index)
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
                fmt.gpus(gpu_of.get(p.pid, ())),
                fmt.gib(gpu_mem[p.pid]) + " GiB" if p.pid in gpu_mem else fmt.NA,
                fmt.pct(gpu_sm.get(p.pid)),
            )
        )
    return rows


def process_table(snap: Snapshot, width: int = 200, floor: Sequence[int] = ()) -> Text:
    """The process table as text: the columns that fit ``width``, the most telling first
    (the PID, its role, its CPU and GPU use), each as wide as its widest cell and at least
    ``floor`` (the widths shown before: columns that do not jump as figures change)."""
    rows = process_rows(snap)
    text = fit_columns(PROCESS_COLUMNS, rows, PROCESS_PRIORITY, width, PROCESS_NUMBERS, floor)
    styled = Text(no_wrap=True, overflow="crop")
    for index, line in enumerate(text.splitlines()):
        role = rows[index - 1][1] if index else ""
        style = "bold reverse" if index == 0 else ("cyan" if role == "worker" else "")
        styled.append(line + "\n", style=style)
    if not snap.processes:
        styled.append("no processes sampled yet", style="dim")
    return styled


PROCESS_COLUMNS = (
    "PID",
    "role",
    "name",
    "CPU",
    "RSS",
    "read/s",
    "write/s",
    "state",
    "GPU",
    "GPU mem",
    "SM",
)
# PID, role, CPU, GPU mem, SM, the GPU's index, RSS, IO, ...
PROCESS_PRIORITY = (0, 1, 3, 9, 10, 8, 4, 5, 6, 7, 2)
PROCESS_NUMBERS = frozenset({3, 4, 5, 6, 9, 10})  # right-aligned


def column_widths(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> tuple[int, ...]:
    """Each column's widest cell, the header included."""
    return tuple(max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers))


def fit_columns(
    headers: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    priority: tuple[int, ...],
    width: int,
    numbers: frozenset[int],
    floor: Sequence[int] = (),
) -> str:
    """Header and rows as lines of the columns that fit ``width``: taken in ``priority``
    order, shown in their own order, one space apart, numbers right-aligned. A column that
    does not fit is left out whole: cells never run together; one with no cell filled (the
    GPU index on a box without NVML) is left out too."""
    widest = column_widths(headers, rows)
    widths = [max(w, floor[i] if i < len(floor) else 0) for i, w in enumerate(widest)]
    chosen: list[int] = []
    used = 0
    for column in priority:
        if rows and not any(row[column] for row in rows):
            continue
        need = widths[column] + (1 if chosen else 0)
        if used + need <= width:
            chosen.append(column)
            used += need
    chosen.sort()

    def line(cells: tuple[str, ...]) -> str:
        parts = [
            cells[c].rjust(widths[c]) if c in numbers else cells[c].ljust(widths[c]) for c in chosen
        ]
        return " ".join(parts).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def outcome_line(snap: Snapshot) -> Text:
    """Once the job has ended: how, and what the whole run did."""
    text = Text("■ The job ", style="bold")
    text.append_text(job_state(snap))
    run = snap.run_steps
    if run is not None and run.steps:
        text.append(
            f": {snap.total_steps} steps in {fmt.duration(snap.elapsed_s)}, "
            f"{fmt.rate(run.samples_per_s, 'samples/s')}, step p50 {fmt.ms(run.step_ms_p50)}, "
            f"data-wait {fmt.pct(run.data_wait_pct)} over the run"
        )
    if snap.job.failed and snap.job.stderr_tail:
        text.append(f"\n  {snap.job.stderr_tail[-1]}", style="red")
    return text


def findings_panel(view: View) -> Text:
    """The headline finding: what holds the step back, the evidence, the next change; once
    the job has ended, its outcome first."""
    top = view.findings
    text = Text()
    if not view.snap.job.running:
        text.append_text(outcome_line(view.snap))
        text.append("\n")
    text.append("▶ ", style="bold")
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
    if knob.unavailable and knob.pending is None:
        text.append(f"n/a: {knob.unavailable}", style="dim")
    elif knob.pending is not None:
        text.append(f"→ {knob.pending} (pending: applies at the next step)", style="yellow")
    elif knob.error:
        text.append(f"✗ {knob.error}", style="red")
    elif _warming_up(knob, snap):
        busy = "compiling…" if knob.name == "compile" and knob.value else "warming up…"
        text.append(busy, style="cyan")
    else:
        text.append(knob.help, style="dim")
        if knob.numerics:
            text.append(f" ({knob.numerics})", style="dim italic")
    return text


def _warming_up(knob: KnobState, snap: Snapshot) -> bool:
    if not snap.phases:
        return False
    last = snap.phases[-1]
    return last.phase.index > 1 and last.steps == 0 and knob.name in last.phase.change


# The change and what it did first: samples/s and speed-up, then why (wait, GPU, memory).
PHASE_PRIORITY = (0, 1, 4, 10, 6, 7, 8, 9, 5, 2, 3)
PHASE_NUMBERS = frozenset({0, 2, 3, 4, 5, 6, 7, 8, 9, 10})


def phase_table(snap: Snapshot, width: int = 200) -> Text:
    """The phase table: one row per configuration, speed-up against the first phase; the
    columns that fit ``width``, most telling first."""
    rows = []
    for row in snap.phases:
        change = row.phase.change + (" ✗ reverted" if row.phase.failed else "")
        rows.append(
            (
                str(row.phase.index),
                change if len(change) <= 28 else change[:27] + "…",
                str(row.steps),
                fmt.ms(row.warmup_s * 1000) if row.warmup_s else fmt.NA,
                *phase_figures(row),
            )
        )
    text = Text("Phases ", style="bold")
    text.append(f"({warmup_caption()})\n", style="dim")
    lines = fit_columns(PHASE_COLUMNS, rows, PHASE_PRIORITY, width, PHASE_NUMBERS).splitlines()
    text.append(lines[0] + "\n", style="bold reverse")
    for row, line in zip(snap.phases, lines[1:], strict=True):
        text.append(line + "\n", style="red" if row.phase.failed else "")
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
