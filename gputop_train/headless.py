"""Headless front end: one status line (or JSON object) per interval, and a closing summary."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from . import events, tables
from . import format as fmt
from .job import Job
from .job.log import LogTail
from .monitor.monitor import Monitor
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


def _emit(out: TextIO, text: str) -> None:
    try:
        out.write(text + "\n")
        out.flush()
    except OSError as error:  # EPIPE: `| head` is done; EIO: the terminal is gone
        raise ReaderGone(error) from error


def run_headless(
    job: Job,
    monitor: Monitor,
    interval_s: float,
    window_s: float,
    as_json: bool,
    log: LogTail | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Print a status per interval until the job ends, and the job's output (its log, when
    we launched it) on ``err``. Returns the job's exit code (0 when it keeps running).

    Ctrl+C and SIGTERM are passed on to a job we started (``timeout`` and schedulers stop a
    command with SIGTERM); from a monitor attached by PID they detach. SIGHUP (an SSH drop)
    or a terminal that is gone stop the monitor only: the job runs in its own session and
    carries on, ready for a later attach. A closed pipe
    (``| head``) ends the pipeline: a job we started is stopped as Ctrl+C would, and the
    summaries are still written (docs/exits.md).
    """
    session = monitor.session
    stop_waiting = threading.Event()
    ended: list[int | None] = []
    ended_at: list[float] = []
    echo = log is not None

    # A signal handler runs on the main thread between two of its bytecodes, maybe inside
    # session.snapshot() with the session's lock held, or inside a write to ``err``: it only
    # signals the job and leaves the stop's event and line here, for the loop (a handler that
    # applied the event itself deadlocked a monitor on Ctrl+C, the job running on).
    from_handlers: queue.SimpleQueue[tuple[events.Event, str]] = queue.SimpleQueue()

    def forward_interrupt(signum: int, frame: Any) -> None:
        sent = job.interrupt()
        firmer = {"SIGINT": "; Ctrl+C again sends SIGTERM", "SIGTERM": "; again: SIGKILL"}
        line = f"gputop-train: sent {sent} to the job{firmer.get(sent, '')}\n"
        from_handlers.put((events.StopAsked("Ctrl+C"), line))

    def detach(signum: int, frame: Any) -> None:
        stop_waiting.set()

    def forward_terminate(signum: int, frame: Any) -> None:
        sent = job.terminate()
        again = "; SIGKILL in 30 s, or at once if asked again" if sent == "SIGTERM" else ""
        line = f"gputop-train: got SIGTERM: sent {sent} to the job{again}\n"
        from_handlers.put((events.StopAsked("SIGTERM"), line))

    def take_handled() -> None:
        """What the signal handlers left: each stop recorded, each line said."""
        while not from_handlers.empty():
            event, line = from_handlers.get()
            session.apply(event)
            with contextlib.suppress(OSError):
                err.write(line)
                err.flush()

    def wait_for_job() -> None:
        try:
            code = job.wait()
            ended_at.append(time.time())
            ended.append(code)
        finally:  # a waiter that died must not leave the monitor waiting forever
            stop_waiting.set()

    def copy_output() -> None:
        nonlocal echo
        if not echo or log is None:
            return
        try:
            for line in log.read_new():
                err.write(line + "\n")
            err.flush()
        except OSError:  # the terminal is gone: the log file keeps everything
            echo = False

    signal.signal(signal.SIGINT, forward_interrupt if job.owned else detach)
    signal.signal(signal.SIGTERM, forward_terminate if job.owned else detach)
    signal.signal(signal.SIGHUP, detach)
    threading.Thread(target=wait_for_job, daemon=True).start()
    try:
        while not stop_waiting.wait(interval_s):
            take_handled()
            copy_output()
            _emit(out, _status(view_of(session.snapshot(window_s)), as_json))
    except ReaderGone as gone:
        _silence(out)
        if gone.pipe and job.owned:  # the pipeline is over: so is the job, as with Ctrl+C
            session.apply(events.StopAsked("the output pipe was closed"))
            # What the job says as it stops (its KeyboardInterrupt traceback) stays in its
            # log: the reader that asked for the output is gone.
            copy_output()
            echo = False
            _say(err, "the output pipe was closed: stopping the job" + _log_text(log))
            job.stop()
            stop_waiting.wait(30.0)
    take_handled()  # a stop asked just before the job ended is recorded before its end
    if ended:

        def last_output() -> tuple[str, ...]:
            copy_output()  # to the terminal, as every line before it
            # Kept with the end too: how it ended (torchrun's "got signal: 2") tells a stop
            # from a crash (session/job_end.py).
            if log is None:
                return ()
            if not echo:
                log.read_new()
            return tuple(log.last(20))

        monitor.close_job(ended[0], ended_at[0], last_output)
    monitor.stop()
    final = view_of(
        session.snapshot(window_s=session.clock() - session.started_at + 1.0, with_phases=True)
    )
    try:
        _emit(out, _summary(final, as_json))
    except ReaderGone:
        _silence(out)
    if not ended:
        return 0
    return ended[0] if ended[0] is not None else 0


def _log_text(log: LogTail | None) -> str:
    return f"; its output is in {log.path}" if log is not None else ""


def _say(err: TextIO, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        err.write(f"gputop-train: {text}\n")
        err.flush()


def _status(view: View, as_json: bool) -> str:
    return json.dumps(status_fields(view)) if as_json else status_line(view)


def _summary(view: View, as_json: bool) -> str:
    if not as_json:
        return summary_text(view)
    fields = {**status_fields(view), "type": "summary", "exit_code": view.snap.job.exit_code}
    return json.dumps({**fields, "phases": phase_dicts(view)})


def _silence(out: TextIO) -> None:
    """Point a dead stdout at /dev/null: no BrokenPipeError at interpreter exit."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
