"""Headless front end: one status line (or JSON object) per interval, and a closing summary."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any, TextIO

from . import events
from . import format as fmt
from .job import Job
from .job.log import LogTail
from .monitor.monitor import Monitor
from .session.model import Snapshot
from .views import (
    TRIAL_COLUMNS,
    View,
    phase_dicts,
    phase_figures,
    status_fields,
    trial_rows,
    view_of,
)

# After the job exits, how long to wait for its hook's last frames.
DRAIN_S = 3.0


def status_line(view: View) -> str:
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
    return (
        f"[{fmt.duration(snap.elapsed_s):>7}] phase {snap.phase} step {snap.total_steps}"
        f" | {f.steps_per_s} steps/s {f.samples_per_s} samples/s {f.tokens_per_s} tokens/s"
        f" | step {f.step_p50} (p95 {f.step_p95})"
        f" | data-wait {f.data_wait}{_wait_source(snap)}"
        f" | GPU time {f.gpu_time}"
        f" | parts {f.breakdown}"
        f" | GPU util {f.gpu_util}{gpm}"
        f" | mem {f.gpu_mem}"
        f" | {workers} | main {fmt.pct(procs.main_cpu_pct)} CPU"
        f" | {headline(view)}{_autopilot_text(snap)}"
    )


def _autopilot_text(snap: Snapshot) -> str:
    return f" | autopilot: {snap.autopilot['state']}" if snap.autopilot else ""


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
        f"{fmt.rate(r.steps.samples_per_s, 'samples/s')}"
        for r in snap.ranks
    ]


def summary_text(view: View) -> str:
    """The closing summary over the whole run."""
    snap = view.snap
    steps, gpu = snap.steps, snap.gpu
    lines = [
        f"gputop-train: {' '.join(snap.command)}",
        f"  duration {fmt.duration(snap.elapsed_s)}, {snap.total_steps} steps, "
        f"{snap.total_samples if snap.total_samples is not None else fmt.NA} samples",
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
    for notice in snap.notices[-5:]:
        lines.append(f"  note: {notice}")
    achieved, mfu = view.achieved_tflops, view.mfu_pct
    if achieved is not None and snap.observation is not None:
        against = (
            f"against the dense peak of {snap.observation.gpu_name}"
            if mfu is not None
            else "no known peak for this device"
        )
        lines.append(
            f"  {achieved:.3g} TFLOP/s achieved (FLOPs counted by the hook), "
            f"MFU {fmt.pct(mfu)}: {against}"
        )
    for finding in view.findings[:3]:
        lines.append(f"  finding: {finding.title} -> {finding.action}")
        lines.extend(f"     - {evidence}" for evidence in finding.evidence)
    if len(snap.phases) > 1 or snap.knobs:
        lines.append("")
        lines.extend(phase_table(view))
    if snap.autopilot:
        lines += ["", f"{snap.autopilot['mode']}: {snap.autopilot['state']}"]
        lines += ["  " + " | ".join(row) for row in [TRIAL_COLUMNS, *trial_rows(snap.autopilot)]]
    lines.append(f"  job exit code {_exit_text(snap)}")
    return "\n".join(lines)


PHASE_COLUMNS = (
    ("#", 3),
    ("change", 28),
    ("steps", 6),
    ("warm-up", 12),
    ("samples/s", 10),
    ("step p50", 10),
    ("data-wait", 9),
    ("GPU util", 8),
    ("tensor", 7),
    ("peak mem", 9),
    ("speed-up", 8),
    ("headline", 24),
)


def phase_table(view: View) -> list[str]:
    """The phase table as text: one row per configuration, speed-up against the first."""
    header = " ".join(
        f"{name:>{w}}" if i > 1 else f"{name:<{w}}" for i, (name, w) in enumerate(PHASE_COLUMNS)
    )
    lines = ["phases (warm-up excluded, see docs/phases.md):", header]
    for phase in view.phases:
        row = phase.row
        change = row.phase.change + (f" (FAILED: {row.phase.failed})" if row.phase.failed else "")
        warmup = f"{row.warmup_steps} / {fmt.ms(row.warmup_s * 1000) if row.warmup_s else 'N/A'}"
        cells = (
            str(row.phase.index),
            change[:28],
            str(row.steps),
            warmup,
            *phase_figures(row),
            phase.headline,
        )
        lines.append(
            " ".join(
                f"{c:>{w}}" if i > 1 else f"{c:<{w}}"
                for i, (c, (_, w)) in enumerate(zip(cells, PHASE_COLUMNS, strict=True))
            )
        )
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

    def forward_interrupt(signum: int, frame: Any) -> None:
        session.apply(events.StopAsked("Ctrl+C"))
        sent = job.interrupt()
        firmer = {"SIGINT": "; Ctrl+C again sends SIGTERM", "SIGTERM": "; again: SIGKILL"}
        with contextlib.suppress(OSError):
            err.write(f"gputop-train: sent {sent} to the job{firmer.get(sent, '')}\n")
            err.flush()

    def detach(signum: int, frame: Any) -> None:
        stop_waiting.set()

    def forward_terminate(signum: int, frame: Any) -> None:
        session.apply(events.StopAsked("SIGTERM"))
        sent = job.terminate()
        again = "; SIGKILL in 30 s, or at once if asked again" if sent == "SIGTERM" else ""
        with contextlib.suppress(OSError):
            err.write(f"gputop-train: got SIGTERM: sent {sent} to the job{again}\n")
            err.flush()

    def wait_for_job() -> None:
        code = job.wait()
        ended_at.append(time.time())
        ended.append(code)
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
            copy_output()
            _emit(out, _status(view_of(session.snapshot(window_s)), as_json))
    except ReaderGone as gone:
        _silence(out)
        if gone.pipe and job.owned:  # the pipeline is over: so is the job, as with Ctrl+C
            session.apply(events.StopAsked("the output pipe was closed"))
            job.stop()
            stop_waiting.wait(30.0)
    if ended:
        monitor.drain(DRAIN_S)
        copy_output()
        session.apply(events.JobEnded(ended[0], at=ended_at[0]))
        monitor.forget_sockets()
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
