"""Headless front end: one status line (or JSON object) per interval, and a closing summary.

A printer of views: what it prints and when comes from a snapshot source and a clock
(front_end.py); the job's signals, wait, log and close are cli/drive.py's."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from . import format as fmt
from . import tables
from .front_end import Clock, SnapshotSource
from .session.model import Snapshot
from .session.stats import RankStats
from .views import (
    TRIAL_COLUMNS,
    View,
    behind_text,
    ledger_lines,
    phase_dicts,
    rank_split_text,
    status_fields,
    steps_text,
    trial_rows,
    view_of,
    warmup_caption,
)

# Text mode keeps every line within the terminal's width, at most WIDTH (a log or a pipe
# gets WIDTH; the JSON keeps every field whole), wrapped at spaces, never inside a word (an
# 80-column terminal broke 100-column lines mid-word, issue 39); continuation lines are
# indented under the figures, past the clock.
WIDTH = 100
MIN_WIDTH = 40  # narrower, a wrapped line would hold a word or two: let the terminal fold
INDENT = " " * 10


def text_width() -> int:
    """The columns text mode fills: the terminal's (``COLUMNS`` first), at most ``WIDTH``."""
    columns = shutil.get_terminal_size((WIDTH, 24)).columns
    return max(MIN_WIDTH, min(WIDTH, columns))


def _wrapped(
    text: str, width: int, initial_indent: str = "", subsequent_indent: str = ""
) -> list[str]:
    """textwrap at spaces only: a hyphenated word ("data-wait") stays whole."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=initial_indent,
        subsequent_indent=subsequent_indent,
        break_on_hyphens=False,
    )


def fit(parts: Iterable[str], width: int | None = None, indent: str = INDENT) -> list[str]:
    """Segments joined by " | " into lines of at most ``width`` (the terminal's); a segment
    is moved whole to the next line, and one longer than a line on its own is wrapped at its
    words."""
    width = width or text_width()
    lines: list[str] = []
    line = ""
    for part in parts:
        joined = f"{line} | {part}" if line else part
        if len(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        wrapped = _wrapped(indent + part, width, subsequent_indent=indent + "  ")
        lines.extend(wrapped[:-1])
        line = wrapped[-1] if wrapped else indent.rstrip()
    if line:
        lines.append(line)
    return lines


def status_parts(view: View) -> list[str]:
    """The figures of one status, a segment each, in the order they are shown."""
    snap, f = view.snap, view.figures
    gpu, procs = snap.gpu, snap.procs
    workers = (
        f"{procs.workers} workers {fmt.pct(procs.workers_cpu_pct)} CPU"
        if procs.workers
        else "no workers"
    )
    gpm = ""
    if gpu.sm_active_pct is not None or gpu.tensor_active_pct is not None:
        gpm = f" SM {f.sm_active} tensor {f.tensor_active}"
    parts = [
        f"[{fmt.duration(snap.elapsed_s):>7}] phase {snap.phase} step {snap.total_steps}",
        f"{f.steps_per_s} steps/s {f.samples_per_s} samples/s",
        f"{f.tokens_per_s} tokens/s",
        f"step {f.step_p50} (p95 {f.step_p95})",
        f"data-wait {f.data_wait}{_wait_source(snap)}",
    ]
    if snap.steps.gpu_time_pct is None and gpu.util_pct is None and gpu.mem_used_bytes is None:
        parts += ["GPU N/A", f"parts {f.breakdown}"]  # no GPU: one segment, not three N/As
    else:
        parts += [f"GPU time {f.gpu_time}", f"parts {f.breakdown}"]
        parts += [f"{_which_gpus(snap)}util {f.gpu_util}{gpm}", f"mem {f.gpu_mem}"]
    parts += [f"GPU {g.index}: {g.error}" for g in snap.gpus if g.error is not None]
    parts += [workers, f"main {fmt.pct(procs.main_cpu_pct)} CPU"]
    if snap.autopilot:
        parts.append(f"autopilot: {snap.autopilot['state']}")
    if behind := behind_text(snap):
        parts.append(behind)
    return parts


def _which_gpus(snap: Snapshot) -> str:
    """On a node of several GPUs, which the figures are over: "GPU 1 of 8 " ("GPU " alone
    on a one-GPU machine); "assumed" until the job has touched one."""
    job = snap.job_gpus
    if len(snap.latest_gpus) < 2 or job is None:
        return "GPU "
    assumed = " assumed" if job.assumed else ""
    if not job.processes_listed:  # the assumption's why (docs/gpus.md)
        assumed += " (NVML lists no processes)"
    return f"GPU {fmt.spans(job.indices) or 'none'} of {len(snap.latest_gpus)}{assumed} "


def status_line(view: View) -> str:
    """One status as text: the figures, then the headline, every line within the width."""
    width = text_width()
    lines = fit(status_parts(view), width)
    lines += _wrapped(headline(view), width, initial_indent=INDENT, subsequent_indent=INDENT + "  ")
    return "\n".join(lines)


def _wait_source(snap: Snapshot) -> str:
    """A data-wait that is a share of py-spy samples says so (the hook's is of step time)."""
    observation = snap.observation
    return " (py-spy)" if observation and observation.data_wait_source == "py-spy" else ""


def headline(view: View) -> str:
    top = view.headline
    if top is not None:
        return f"▶ {top.title}: {top.action}"
    wait = view.snap.activity_note or view.snap.advice_wait
    return f"▶ no findings: {wait}" if wait else "▶ no findings"


def rank_lines(snap: Snapshot) -> list[str]:
    """One line per rank over the last window: what tells a straggler from the others."""
    return [
        f"{r.label} (PID {r.who.pid}{f', GPU {fmt.gpus(r.gpus)}' if r.gpus else ''}): "
        f"step p50 {fmt.ms(r.steps.step_ms_p50)}, data-wait {fmt.pct(r.steps.data_wait_pct)}, "
        f"{fmt.rate(r.steps.samples_per_s, 'samples/s')}{comm_text(r)}; {rank_split_text(r)}"
        for r in snap.ranks
    ]


def comm_text(r: RankStats) -> str:
    """A rank's wait in collectives, where measured: ", waits 30.9 ms a step in collectives
    (58%)"."""
    if r.comm is None:
        return ""
    return (
        f", waits {fmt.ms(r.comm.wait_ms_p50)} a step in collectives ({fmt.pct(r.comm.wait_pct)})"
    )


def summary_text(view: View) -> str:
    """The closing summary over the whole run."""
    snap = view.snap
    steps, gpu = snap.steps, snap.gpu
    lines = [
        f"gputop-train: {' '.join(snap.command)}",
        f"  duration {fmt.duration(snap.elapsed_s)}, "
        f"{steps_text(snap.total_steps, snap.steps_before_start, snap.total_samples)}",
        f"  throughput {fmt.rate(steps.samples_per_s, 'samples/s')}, "
        f"{fmt.rate(steps.steps_per_s, 'steps/s')}, "
        f"{fmt.rate(steps.tokens_per_s, 'tokens/s')}; step p50 {fmt.ms(steps.step_ms_p50)}, "
        f"p95 {fmt.ms(steps.step_ms_p95)}",
        f"  step parts: {view.figures.breakdown}",
        f"  memory: {view.figures.memory}",
        f"  data-wait {fmt.pct(steps.data_wait_pct)} of "
        f"{'its samples (py-spy)' if _wait_source(snap) else 'step time'}; GPU time "
        f"{fmt.pct(steps.gpu_time_pct)}; GPU util {fmt.pct(gpu.util_pct)} (NVML mean)",
    ]
    if snap.nvml_error:
        lines.append(f"  GPU figures N/A: {snap.nvml_error}")
    if len(snap.ranks) > 1:
        lines.extend(f"  {line}" for line in rank_lines(snap))
    if snap.stacks is not None and not snap.hooked:
        shares = ", ".join(f"{name} {fmt.pct(pct)}" for name, pct in snap.stacks.shares.items())
        lines.append(f"  no hook; last py-spy window of {snap.stacks.thread}: {shares}")
    elif snap.total_steps == 0:
        lines.append(f"  no training steps: {snap.activity_note or 'none seen'}")
        if snap.job.failed and snap.job.stderr_tail:
            lines.append(f"  the job's last output: {snap.job.stderr_tail[-1]}")
    if snap.dropped_frames:
        lines.append(f"  {snap.dropped_frames} malformed frames from the hook were dropped")
    said = [snap.nvml_error] if snap.nvml_error else []
    for notice in once(snap.notices, said)[-5:]:
        lines.append(f"  note: {notice}")
    achieved, mfu = view.achieved_tflops, view.mfu_pct
    if achieved is not None and snap.observation is not None:
        lines.append(f"  {achieved:.3g} TFLOP/s achieved, MFU {fmt.pct(mfu)}")
        lines.extend(f"     - {note}" for note in view.efficiency.notes())
    for finding in view.findings[:3]:
        lines += _wrap(f"  finding: {finding.title} -> {finding.action}", "    ")
        for evidence in finding.evidence:
            lines += _wrap(f"     - {evidence}", "       ")
    if len(snap.phases) > 1 or snap.knobs:
        lines.append("")
        lines.extend(phase_table(view))
    if snap.autopilot:
        lines += ["", f"{snap.autopilot['mode']}: {snap.autopilot['state']}"]
        lines += ["  " + " | ".join(row) for row in [TRIAL_COLUMNS, *trial_rows(snap.autopilot)]]
        lines += ["  " + line for line in ledger_lines(snap.autopilot)]
    lines.append(f"  job exit code {_exit_text(snap)}")
    return "\n".join(line for text in lines for line in (_wrap(text, "    ") if text else [""]))


def _wrap(text: str, indent: str) -> list[str]:
    """A line of text within the width, its continuation lines indented."""
    width = text_width()
    if len(text) <= width:
        return [text]
    return _wrapped(text, width, subsequent_indent=indent) or [""]


def once(notes: Sequence[str], said: Sequence[str] = ()) -> list[str]:
    """Each note once, in order, leaving out those already said (the GPU's N/A reason is
    both the summary's "GPU figures N/A" line and the NVML sampler's notice)."""
    seen = {text.strip() for text in said}
    out = []
    for note in notes:
        key = note.strip()
        if key and key not in seen and not any(key in t or t in key for t in said if t):
            seen.add(key)
            out.append(note)
    return out


def phase_table(view: View) -> list[str]:
    """The phase table (tables.PHASE_COLUMNS) as text: one row per configuration, speed-up
    against the first. Only the columns with a figure in some row (a CPU run has no GPU
    columns), each as wide as its widest cell; the headline ends the row where it fits within
    the text width, else it follows on the next line, with a change too long for its cell."""
    phases = tables.PhaseLine.of_view(view)
    columns = tables.PHASE_COLUMNS
    rows = tables.cells(columns, phases)
    header, *texts = tables.fit(columns, rows, text_width())
    limit = columns[1].cut  # the change's: a cut one is given whole below its row
    extra = [
        (row[1] if tables.cut(row[1], limit) != row[1] else "", phase.headline)
        for phase, row in zip(phases, rows, strict=True)
    ]
    inline = all(
        not change and len(f"{text} {found}") <= text_width()
        for text, (change, found) in zip(texts, extra, strict=True)
    )
    header += " headline" if inline else ""
    lines = [f"phases ({warmup_caption()}, docs/phases.md):", header]
    for text, (change, found) in zip(texts, extra, strict=True):
        if inline:
            lines.append(f"{text} {found}")
            continue
        lines.append(text)
        lines += _wrap(f"    {change + ': ' if change else ''}▶ {found}", "      ")
    return lines


def _exit_text(snap: Snapshot) -> str:
    if snap.job.running:
        return "N/A (still running)"
    if snap.job.exit_code is None:
        return "unknown (an attached monitor cannot read the exit code of another's process)"
    return str(snap.job.exit_code)


class ReaderGone(Exception):
    """stdout's reader went away (a closed pipe) or its terminal did (EIO)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.pipe = isinstance(error, BrokenPipeError)


@dataclass(frozen=True)
class Printer:
    """Headless's lines on ``out``: a status per interval of the ``clock`` over the last
    ``window_s``, and the summary over the whole run, as text or JSON. The job's driving (its
    signals, wait, log and close) is the clock's keeper's (cli/drive.py): a printer handles no
    signal and no process, so a fake source and a fake clock test it."""

    source: SnapshotSource
    clock: Clock
    window_s: float
    as_json: bool
    out: TextIO

    def statuses(self, interval_s: float) -> None:
        """A status each ``interval_s`` until the clock says the watch is over; ReaderGone
        when stdout's reader is gone (the caller silences it and decides for the job)."""
        while not self.clock.wait(interval_s):
            snap = self.source(self.window_s, 0.0, 0, False)
            _emit(self.out, _status(view_of(snap), self.as_json))

    def summary(self, started_at: float) -> None:
        """The closing summary, over the whole run from ``started_at`` (with its phase
        table); ReaderGone as for a status."""
        whole_run_s = self.clock.now() - started_at + 1.0
        _emit(self.out, _summary(view_of(self.source(whole_run_s, 0.0, 0, True)), self.as_json))


def _emit(out: TextIO, text: str) -> None:
    try:
        out.write(text + "\n")
        out.flush()
    except OSError as error:  # EPIPE: `| head` is done; EIO: the terminal is gone
        raise ReaderGone(error) from error


def _status(view: View, as_json: bool) -> str:
    return json.dumps(status_fields(view)) if as_json else status_line(view)


def _summary(view: View, as_json: bool) -> str:
    if not as_json:
        return summary_text(view)
    fields = {**status_fields(view), "type": "summary", "exit_code": view.snap.job.exit_code}
    return json.dumps({**fields, "phases": phase_dicts(view)})
