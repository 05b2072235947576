"""Text of the dashboard's panels, from one view: pure functions, easy to snapshot-test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text

from ... import format as fmt
from ... import tables
from ...samples import DATA_WAIT
from ...session.breakdown import activations, cache
from ...session.model import Snapshot
from ...session.phases import KnobState
from ...session.stats import RankStats
from ...views import View, behind_text, data_part_label, warmup_caption
from . import gpus as node_gpus

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
        if late := behind_text(snap):
            text.append(f" │ {late}", style="bold yellow")
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
        reason = snap.step_parts_fact.reason if snap.step_parts_fact else None
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
        text.append(f"({data_part_label(parts)})", style="dim")
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


def gpu_panel(snap: Snapshot, width: int = 0) -> Text:
    """One GPU in detail; several, a row each (panels/gpus.py), ``width`` columns wide: the
    same figures over the same window either way (session/gpu_table.py)."""
    text = Text()
    if snap.nvml_error:
        text.append("GPU (NVML)\n", style="bold")
        text.append(f" N/A: {snap.nvml_error}", style="yellow")
        return text
    if not snap.gpus:
        return Text("GPU (NVML)\n waiting for the first sample…", style="dim")
    if len(snap.gpus) > 1:
        text = node_gpus.node_panel(snap, width)
    else:
        text = node_gpus.one_gpu(snap.gpus[0])
    text.append_text(memory_audit(snap))
    return text


def memory_audit(snap: Snapshot) -> Text:
    """What the peak holds (the hook's audit); nothing before the first audit."""
    audit = snap.memory
    if audit is None:
        return Text()
    text = Text(" peak ", style="dim")
    text.append(
        f"{fmt.size(audit.allocated_peak)}: params {fmt.size(audit.params_bytes)}, grads "
        f"{fmt.size(audit.grads_bytes)}, optim {fmt.size(audit.optimizer_bytes)}, act "
        f"{fmt.size(activations(audit))}, cache {fmt.size(cache(audit))}\n"
    )
    retries = fmt.NA if audit.alloc_retries is None else str(audit.alloc_retries)
    ooms = fmt.NA if audit.ooms is None else str(audit.ooms)
    style = "yellow" if audit.alloc_retries or audit.ooms else ""
    text.append(" alloc retries ", style="dim")
    text.append(f"{retries}  OOMs {ooms}\n", style=style)
    return text


def process_table(snap: Snapshot, width: int = 200, floor: Sequence[int] = ()) -> Text:
    """The process table (tables.PROCESS_COLUMNS) as text: the columns that fit ``width``,
    the most telling first (the PID, its role, its CPU and GPU use), each as wide as its
    widest cell and at least ``floor`` (the widths shown before: columns that do not jump as
    figures change)."""
    procs = tables.process_lines(snap)
    return process_text(procs, tables.cells(tables.PROCESS_COLUMNS, procs), width, floor)


def process_text(
    procs: Sequence[tables.ProcessLine],
    rows: Sequence[tuple[str, ...]],
    width: int,
    floor: Sequence[int] = (),
) -> Text:
    """``process_table`` of processes whose cells are made already (the panel sizes its
    columns from them too)."""
    styled = Text(no_wrap=True, overflow="crop")
    for index, line in enumerate(tables.fit(tables.PROCESS_COLUMNS, rows, width, floor)):
        role = procs[index - 1].proc.role if index else ""
        style = "bold reverse" if index == 0 else ("cyan" if role == "worker" else "")
        styled.append(line + "\n", style=style)
    if not procs:
        styled.append("no processes sampled yet", style="dim")
    return styled


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
    else:  # one short line: the panel is 6 rows, and the finding follows
        text.append("\n  its recording: gputop-train report FILE (plots) | compare A B", "dim")
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


# The knob list's narrowest columns: the common knobs' names (num_workers, batch_size) and
# values line up from one script to the next; wider ones widen the column.
KNOB_NAME_COLUMN = 14
KNOB_VALUE_COLUMN = 11


def knob_value(knob: KnobState) -> str:
    """A knob's value in force as its line shows it."""
    return ("on" if knob.value else "off") if knob.kind == "bool" else str(knob.value)


def knob_prompt(
    knob: KnobState,
    snap: Snapshot,
    name_width: int = KNOB_NAME_COLUMN,
    value_width: int = KNOB_VALUE_COLUMN,
    width: int | None = None,
) -> Text:
    """One knob's line: value in force, and pending / warming-up / failed state. The name and
    value columns are ``name_width`` and ``value_width`` wide (the tab passes its widest), and
    always a space wider than what they hold: a name longer than its column ran into its
    value ("matmul_precisionhighest", issue 39). Given the list's ``width``, the help wraps in
    its own column: wrapped by the list, it ran under the names at 80 columns (issue 46)."""
    value = knob_value(knob)
    text = Text(f"{knob.name:<{max(name_width, len(knob.name) + 1)}}", style="bold")
    text.append(f"{value:<{max(value_width, len(value) + 1)}}")
    tail = Text()
    if knob.unavailable and knob.pending is None:
        tail.append(f"n/a: {knob.unavailable}", style="dim")
    elif knob.pending is not None:
        tail.append(f"→ {knob.pending} (pending: applies at the next step)", style="yellow")
    elif knob.error:
        tail.append(f"✗ {knob.error}", style="red")
    elif _warming_up(knob, snap):
        busy = "compiling…" if knob.name == "compile" and knob.value else "warming up…"
        tail.append(busy, style="cyan")
    else:
        tail.append(knob.help, style="dim")
        if knob.numerics:
            tail.append(f" ({knob.numerics})", style="dim italic")
    if width is not None:
        tail = hanging(tail, text.cell_len, width)
    return text + tail


# A help column narrower than this is not worth its own column: the list wraps it instead.
MIN_HANGING_COLUMN = 16


def hanging(tail: Text, indent: int, width: int) -> Text:
    """``tail`` wrapped at its spaces into ``width - indent`` columns, each line after the
    first indented by ``indent``: a hanging column beside the name and value."""
    room = width - indent
    if room < MIN_HANGING_COLUMN or tail.cell_len <= room:
        return tail
    plain, cuts, start = tail.plain, [], 0
    while len(plain) - start > room:
        space = plain.rfind(" ", start + 1, start + room + 1)
        start = space + 1 if space > start else start + room  # a word wider than the column
        cuts.append(start)
    lines = list(tail.divide(cuts))
    for line in lines:
        line.rstrip()  # the space it was cut at
    return Text("\n" + " " * indent).join(lines)


def _warming_up(knob: KnobState, snap: Snapshot) -> bool:
    if not snap.phases:
        return False
    last = snap.phases[-1]
    return last.phase.index > 1 and last.steps == 0 and knob.name in last.phase.change


def phase_table(view: View, width: int = 200) -> Text:
    """The phase table (tables.PHASE_COLUMNS): one row per configuration, speed-up against the
    first phase; the columns that fit ``width``, most telling first; a reverted one in red."""
    phases = tables.PhaseLine.of_view(view)
    text = Text("Phases ", style="bold")
    text.append(f"({warmup_caption()})\n", style="dim")
    rows = tables.cells(tables.PHASE_COLUMNS, phases)
    lines = tables.fit(tables.PHASE_COLUMNS, rows, width)
    text.append(lines[0] + "\n", style="bold reverse")
    for phase, line in zip(phases, lines[1:], strict=True):
        text.append(line + "\n", style="red" if phase.failed else "")
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
