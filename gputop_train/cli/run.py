"""Launching or attaching to a job, then watching it with the TUI or headless.

Every way out (the job ends, q, Ctrl+C, a closed pipe, SIGTERM, SIGHUP) closes the recording,
writes the summaries it can, and says where each file is (docs/exits.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__, events, wire
from ..collect.stacks import StackSampler, StacksUnavailable
from ..export.identity import identify
from ..export.prometheus import Exporter, ExporterError, Tls, parse_address, serve
from ..job import Job
from ..job.attached import AttachError, find_job, no_hook_advice, output_of, python_process
from ..job.launched import LaunchError, build_command, start_job
from ..job.log import LogTail
from ..monitor.monitor import Monitor
from ..monitor.priority import yield_to_job
from ..monitor.stall import stall_folder
from ..record.files import RecordError
from ..record.session_files import SessionFiles
from ..session.model import Session
from ..views import view_of
from . import drive
from .held_interrupts import HeldInterrupts


def launch(args: argparse.Namespace) -> int:
    """``gputop-train [OPTIONS] SCRIPT`` / ``-- COMMAND``: start the job, then watch it.
    Ctrl+C until the front end takes over is held (cli/held_interrupts.py)."""
    return _holding_interrupts(_launch, args)


def _holding_interrupts(
    run: Callable[[argparse.Namespace, HeldInterrupts], int], args: argparse.Namespace
) -> int:
    """``run`` with Ctrl+C held until its front end takes over (it releases them there)."""
    held = HeldInterrupts().hold()
    try:
        return run(args, held)
    finally:
        held.release()


def _launch(args: argparse.Namespace, held: HeldInterrupts) -> int:
    try:
        command = build_command(args.target, args.raw_command)
    except LaunchError as error:
        _say(str(error))
        return 2
    session = Session(command=tuple(command))
    outputs = _open_outputs(args, command, session)  # before the job starts
    if outputs is None:
        return 2
    exporter, files, warnings = outputs
    try:
        log_fd = files.open_log()
    except (RecordError, wire.UnsafeRuntimeDir) as error:
        _say(str(error))
        _close(exporter)
        return 2
    if held.count:  # before the job: nothing to stop, nothing started
        os.close(log_fd)
        _say("interrupted (Ctrl+C) before the job started: it was not started")
        _report(files.finish(session, job_running=False))
        _close(exporter)
        return 130
    try:
        job = start_job(command, log_fd, args.schedule, args.autopilot, recording=files.recording)
    except LaunchError as error:
        _say(str(error))
        _report(files.finish(session, job_running=False))
        _close(exporter)
        return 2
    finally:
        os.close(log_fd)  # the relay holds it now
    try:
        monitor = _start_monitor(args, session, job.pid, recording=files.recording)
        monitor.watch_stalls(stall_folder(files.stem, job.pid), args.stall_after)
    except Exception:  # our own bug (a sampler that failed to open): the job comes first
        _hand_over(job, files, session)
        raise
    _tell_stops(job, session, monitor)
    log = LogTail(files.log)
    return _watch(Watched(args, session, files, job, monitor), log, log, exporter, warnings, held)


def attach(args: argparse.Namespace) -> int:
    """``gputop-train attach PID``: watch a running job, hooked or sampled with py-spy.
    Ctrl+C until the front end takes over is held (cli/held_interrupts.py)."""
    return _holding_interrupts(_attach, args)


def _attach(args: argparse.Namespace, held: HeldInterrupts) -> int:
    try:
        job, command, hooked = find_job(args.pid)
    except (AttachError, wire.UnsafeRuntimeDir, OSError) as error:
        _say(str(error))
        return 2
    stacks = None
    if not hooked and python_process(job.pid) is False:
        _say(
            f"PID {job.pid} ({' '.join(command)[:60]}) is not a Python process: gputop-train "
            "watches Python training jobs (give the PID of the training script, or torchrun's)"
        )
        return 2
    if not hooked:  # still worth watching: GPU, processes, and where its time goes (py-spy)
        stacks = StackSampler(job.pid, window_s=args.stack_window)
        try:
            stacks.check()
        except StacksUnavailable as error:
            _say(f"{no_hook_advice(job.pid, command)}.")
            _say(f"nor can its stacks be sampled: {error}")
            return 2
        _say(
            f"{no_hook_advice(job.pid, command)}. Meanwhile its training thread is sampled "
            f"with py-spy, a {stacks.window_s:g} s window at a time."
        )
    session = Session(command=tuple(command))
    outputs = _open_outputs(args, command, session)
    if outputs is None:
        return 2
    exporter, files, warnings = outputs
    if stacks is not None:
        session.apply(events.StacksExpected(stacks.window_s))  # py-spy's first window due
    monitor = _start_monitor(args, session, job.pid, stacks)
    monitor.watch_stalls(stall_folder(files.stem, job.pid), args.stall_after)
    _tell_stops(job, session, monitor)
    output = output_of(job.pid)
    log = LogTail(output) if isinstance(output, Path) else None
    session.apply(
        events.NoticeAdded(
            f"the job's output goes to {output}" + ("" if log else ": not shown here")
        )
    )
    # Headless, an attached job's output is not relayed (it is not ours to print).
    return _watch(Watched(args, session, files, job, monitor), log, None, exporter, warnings, held)


@dataclass(frozen=True)
class Watched:
    """A job being watched, from the monitor's start to the report of its files: what every
    step of the watch reads (the user's options, the session, its files, the job, the
    monitor), launched and attached alike."""

    args: argparse.Namespace
    session: Session
    files: SessionFiles
    job: Job
    monitor: Monitor

    def report(self) -> None:
        """The recording closed, and where each of its files is said."""
        _report(self.files.finish(self.session, job_running=self.job.running()))


def _watch(
    watched: Watched,
    log: LogTail | None,
    headless_log: LogTail | None,
    exporter: Exporter | None,
    warnings: list[str],
    held: HeldInterrupts,
) -> int:
    """The front end the user asked for, until the session ends; then the endpoint closes.
    ``warnings``: what went wrong at start-up, said on stderr already; the TUI, which hides
    stderr, says them again. ``held``: Ctrl+C while starting, passed on here."""
    args, session, job, monitor = watched.args, watched.session, watched.job, watched.monitor
    try:
        headless = _headless(args)
        if getattr(args, "schedule", None):
            # Said once, as soon as the job's knobs are known: headless on stderr at once,
            # the TUI in its Log (not again when the hook refuses the entry at its step).
            monitor.check_schedule(args.schedule, say=_say if headless else None)
        if held.take() and not _pass_on_interrupt(session, job):
            return _left_while_starting(watched)
        if headless:  # its own handlers replace the held one, with no default one between
            return _run_headless(watched, headless_log)
        if held.release() and not _pass_on_interrupt(session, job):  # Textual's keys from now
            return _left_while_starting(watched)
        return _run_tui(watched, log, warnings)
    finally:
        _linger(exporter, job, session, getattr(args, "prometheus_linger", None))
        _close(exporter)


def _left_while_starting(watched: Watched) -> int:
    """Ctrl+C while starting, on an attached job: the monitor leaves, the job runs on."""
    watched.monitor.stop()
    _leave(watched.job, watched.files)
    watched.report()
    return 0


def _pass_on_interrupt(session: Session, job: Job) -> bool:
    """A Ctrl+C that came while the monitor started, handled as one later: a job we started
    gets SIGINT and is watched as it stops (True); an attached one is left running (False)."""
    if not job.owned:
        _say("interrupted (Ctrl+C) while starting: leaving the job as it runs")
        return False
    if job.running():
        session.apply(events.StopAsked("Ctrl+C"))
        _say(f"interrupted (Ctrl+C) while starting: sent {job.interrupt()} to the job")
    return True


def _tell_stops(job: Job, session: Session, monitor: Monitor) -> None:
    """What a stop the job does not heed says (docs/exits.md): on stderr and in the Log, and
    where each rank waits from the stall dump."""

    def tell(text: str) -> None:
        _say(text)
        session.apply(events.NoticeAdded(text))

    job.tell = tell
    job.where_waiting = monitor.where_waiting


# After a job that ended by itself, the endpoint stays up until every regular scraper has read
# the end (job_running 0, job_exit_code: finished or crashed), at most this long: two scrapes at
# Prometheus's usual 15 s interval, four at the job view's and a 5 s one.
LINGER_S = 30.0
LINGER_POLL_S = 0.2


def _linger(exporter: Exporter | None, job: Job, session: Session, seconds: float | None) -> None:
    """``--prometheus-linger``: an ended job's last metrics stay up for the scrapers to see;
    by default (None) until each client that scraped the job regularly (twice or more: each
    Prometheus of an HA pair, a poller; not a lone curl) has read the end, at most LINGER_S,
    when the job ended by itself (a stop the user asked for ends the monitor at once). Ctrl+C
    ends the wait."""
    if exporter is None or job.running():
        return
    exporter.job_ended()
    until_scraped = seconds is None
    if seconds is None:
        if session.snapshot(window_s=1.0).job.stopped_by is not None:
            return
        seconds = LINGER_S
    if seconds <= 0:
        return
    wait = "until every scraper has read them, at most " if until_scraped else ""
    _say(f"the job ended: its final metrics stay at {exporter.url} {wait}{seconds:g} s")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    deadline = time.monotonic() + seconds
    with contextlib.suppress(KeyboardInterrupt):
        while time.monotonic() < deadline:
            if until_scraped and exporter.end_read_by_every_scraper():
                return
            threading.Event().wait(LINGER_POLL_S)


def _open_outputs(
    args: argparse.Namespace, command: list[str], session: Session
) -> tuple[Exporter | None, SessionFiles, list[str]] | None:
    """The metrics endpoint, then the recording's files, and the start-up warnings; None,
    said, where either cannot be had (a malformed address, an unwritable folder: the user's
    to fix before anything starts; a port in use does not stop the job)."""
    warnings: list[str] = []
    try:
        exporter = _serve_metrics(args, session, warnings)
    except ExporterError as error:
        _say(str(error))
        return None
    try:
        files = _open_files(args, command, session)
    except (RecordError, wire.UnsafeRuntimeDir) as error:
        _say(str(error))
        _close(exporter)
        return None
    return exporter, files, warnings


def _serve_metrics(
    args: argparse.Namespace, session: Session, warnings: list[str]
) -> Exporter | None:
    """``--prometheus``: the endpoint, serving a view of the moment at each scrape; what
    went wrong is said on stderr and added to ``warnings``."""
    if not args.prometheus:
        return None
    parse_address(args.prometheus)  # ExporterError: a typo is the user's to fix first
    window_s = args.window
    if args.prometheus_client_ca and not args.prometheus_tls:
        raise ExporterError("--prometheus-client-ca needs --prometheus-tls CERT KEY")
    tls = None
    if args.prometheus_tls:
        certfile, keyfile = args.prometheus_tls
        tls = Tls(certfile, keyfile, args.prometheus_client_ca)
    try:
        exporter = serve(
            args.prometheus,
            lambda: view_of(session.snapshot(window_s=window_s)),
            identify(session.command, job=args.prometheus_job, node=args.node),
            tls,
        )
    except ExporterError as error:
        # The training job comes first: it starts without the endpoint, and says so.
        message = f"{error}; the job runs without the metrics endpoint"
        _say(message)
        session.apply(events.NoticeAdded(message))
        warnings.append(message)
        return None
    _say(f"Prometheus metrics at {exporter.url}")
    session.apply(events.NoticeAdded(f"Prometheus metrics at {exporter.url}"))
    if exporter.warning:
        _say(exporter.warning)
        session.apply(events.NoticeAdded(exporter.warning))
        warnings.append(exporter.warning)
    return exporter


def _close(exporter: Exporter | None) -> None:
    if exporter is not None:
        exporter.close()


def _open_files(args: argparse.Namespace, command: list[str], session: Session) -> SessionFiles:
    meta = {
        "command": command,
        "host": socket.gethostname(),
        "started_at": session.started_at,
        "cpu_count": os.cpu_count(),
        "gputop_train": __version__,
    }
    return SessionFiles.open(args.record, args.no_record, command, session, meta)


def _start_monitor(
    args: argparse.Namespace,
    session: Session,
    pid: int,
    stacks: StackSampler | None = None,
    recording: Path | None = None,
) -> Monitor:
    if not args.no_nice:  # before the monitor's threads start: they inherit it
        _import_the_tui_first(args)
        problem = yield_to_job(pid)
        if problem:
            session.apply(
                events.NoticeAdded(f"the monitor could not lower its priority ({problem})")
            )
    monitor = Monitor(session, pid, stacks=stacks, window_s=args.window, recording=recording)
    monitor.start()
    if args.autopilot or args.tries:
        monitor.start_pilot(args.tries, budget_s=60.0 * args.autopilot_budget)
    return monitor


def _import_the_tui_first(args: argparse.Namespace) -> None:
    """The TUI's modules (Textual: ~0.15 s of CPU) imported before the monitor yields the
    CPU to the job: imported after, at nice 10 beside busy loops, they took 2.1 s of a 3.0-s
    blank screen (issue 46; docs/benchmarks.md §5, "The first frame")."""
    if not getattr(args, "headless", False) and sys.stdout.isatty():
        from ..tui import app  # noqa: F401


def _headless(args: argparse.Namespace) -> bool:
    if args.headless:
        return True
    if not sys.stdout.isatty():
        _say("stdout is not a terminal: running headless")
        return True
    if in_background():
        # A TUI there is stopped (SIGTTOU) at its first terminal setting, and no signal
        # gets it out: `timeout` from a script waited for ever. Our writes must not stop us
        # either (`stty tostop`): the job was started before, so it keeps its own handling.
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        _say(
            "not in the terminal's foreground (a script's `timeout`, or `&`): running "
            "headless; `timeout --foreground` keeps the terminal for the TUI"
        )
        return True
    return False


def in_background() -> bool:
    """Whether our terminal belongs to another process group than ours: `timeout` puts its
    command in a group of its own, `&` in a job of its own. A terminal that is not our
    controlling one says nothing either way."""
    for stream in (sys.stdin, sys.stdout):
        try:
            if stream.isatty() and os.tcgetpgrp(stream.fileno()) != os.getpgrp():
                return True
        except (OSError, ValueError, AttributeError):
            continue
    return False


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # after an SSH drop there is no terminal to write to
        print(f"gputop-train: {text}", file=sys.stderr, flush=True)


def _report(closed: Any) -> None:
    """Where the session's files are (the recording first: replay and summary take it)."""
    for path in closed.written:
        _say(f"wrote {path}")
    for problem in closed.problems:
        _say(problem)


def _hand_over(job: Job, files: SessionFiles, session: Session) -> None:
    """The monitor failed as it started, after it launched the job: the job runs on, handed
    over to whoever attaches (it is hooked), and the user is told so, with where its output
    and the recording are (docs/exits.md). Stopping it would end work the user asked for
    because of our bug; leaving it unsaid left it running unwatched (issue 46)."""
    _say("the monitor failed as it started (below); the job it launched is left running")
    _leave(job, files)
    with contextlib.suppress(Exception):
        _report(files.finish(session, job_running=True))


def _leave(job: Job, files: SessionFiles | None, monitor: Monitor | None = None) -> None:
    where = f"; its output goes to {files.log}" if files is not None and job.owned else ""
    _say(f"job PID {job.pid} keeps running{where} (gputop-train attach {job.pid})")
    trial = monitor.trial_under_way() if monitor is not None else None
    if trial is not None:
        _say(f"the trial of {trial} is undone by the job at its next step (it was this monitor's)")


def _run_headless(watched: Watched, log: LogTail | None) -> int:
    args, job, monitor = watched.args, watched.job, watched.monitor
    snap = watched.session.snapshot()
    if snap.nvml_error:
        _say(f"GPU figures are N/A: {snap.nvml_error}")
    as_json = args.format == "json"
    outcome = drive.drive_headless(job, monitor, args.interval, args.window, as_json, log)
    if job.running():
        _leave(job, watched.files, monitor)
    watched.report()
    return outcome


def _run_tui(watched: Watched, log: LogTail | None, warnings: list[str]) -> int:
    """``log`` is the job's output: its log when we launched it; when attached, the file its
    stdout points at, if it is one. ``warnings`` open the TUI as toasts."""
    from ..tui.app import create_app
    from ..tui.boundary import AppOptions

    args, job, monitor = watched.args, watched.job, watched.monitor
    waiter = drive.watch_job_end(job, monitor, LogTail(log.path) if log is not None else None)
    options = AppOptions(
        job_pid=job.pid,
        log=log,
        refresh_s=max(0.1, args.refresh),
        window_s=args.window,
        save_screenshot=watched.files.save_screenshot,
        job_owned=job.owned,
        warnings=tuple(warnings),
    )
    app = create_app(watched.session.snapshot, options, controls=monitor)
    drive.exit_on_signals(app.exit, job.owned)
    choice = app.run()
    code = 0
    if choice == "leave" and job.running():
        _leave(job, watched.files, monitor)
    else:
        code = drive.end_after_tui(choice, job, watched.session, waiter)
    monitor.stop()
    watched.report()
    return code
