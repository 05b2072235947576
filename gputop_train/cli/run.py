"""Launching or attaching to a job, then watching it with the TUI or headless."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from .. import __version__, wire
from ..collect.stacks import StackSampler, StacksUnavailable
from ..job import Job
from ..job.attached import AttachError, find_job, no_hook_advice
from ..job.launched import LaunchedJob, LaunchError, build_command, start_job
from ..job.log import LogTail
from ..monitor.monitor import Monitor
from ..record.paths import new_session_stem
from ..record.recorder import Recorder
from ..record.summary import write_all
from ..session.model import Session


def launch(args: argparse.Namespace) -> int:
    """``gputop-train [OPTIONS] SCRIPT`` / ``-- COMMAND``: start the job, then watch it."""
    try:
        command = build_command(args.target, args.raw_command)
    except LaunchError as error:
        print(f"gputop-train: {error}", file=sys.stderr)
        return 2
    session = Session(command=tuple(command))
    files = _open_record(args, command, session)
    if _headless(args):
        launched = _launch(args, command, session, files, output=sys.stderr)
        return 2 if launched is None else _run_headless(args, session, files, *launched)
    with files.log.open("ab") as log_file:  # the job writes here: no pipe to break on quit
        launched = _launch(args, command, session, files, output=log_file)
    return 2 if launched is None else _run_tui(args, session, files, *launched, LogTail(files.log))


def attach(args: argparse.Namespace) -> int:
    """``gputop-train attach PID``: watch a running job, hooked or sampled with py-spy."""
    try:
        job, command, hooked = find_job(args.pid)
    except (AttachError, wire.UnsafeRuntimeDir, OSError) as error:
        print(f"gputop-train: {error}", file=sys.stderr)
        return 2
    stacks = None
    if not hooked:  # still worth watching: GPU, processes, and where its time goes (py-spy)
        stacks = StackSampler(job.pid, window_s=args.stack_window)
        try:
            stacks.check()
        except StacksUnavailable as error:
            print(f"gputop-train: {no_hook_advice(job.pid, command)}.", file=sys.stderr)
            print(f"gputop-train: nor can its stacks be sampled: {error}", file=sys.stderr)
            return 2
        print(
            f"gputop-train: {no_hook_advice(job.pid, command)}. Meanwhile its training thread "
            f"is sampled with py-spy, a {stacks.window_s:g} s window at a time.",
            file=sys.stderr,
        )
    session = Session(command=tuple(command))
    files = _open_record(args, command, session)
    monitor = Monitor(session, job.pid, stacks=stacks, window_s=args.window)
    monitor.start()
    _start_pilot(args, monitor)
    if _headless(args):
        return _run_headless(args, session, files, job, monitor)
    return _run_tui(args, session, files, job, monitor, None)


def _headless(args: argparse.Namespace) -> bool:
    if not args.headless and not sys.stdout.isatty():
        print("gputop-train: stdout is not a terminal: running headless", file=sys.stderr)
        return True
    return bool(args.headless)


def _open_record(args: argparse.Namespace, command: list[str], session: Session) -> SessionFiles:
    """Where this session's files go, and the recorder that writes its JSONL (unless off)."""
    stem = Path(args.record).with_suffix("") if args.record else new_session_stem(command)
    stem.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": command,
        "host": socket.gethostname(),
        "started_at": session.started_at,
        "cpu_count": os.cpu_count(),
        "gputop_train": __version__,
    }
    recorder = None
    if not args.no_record:
        recorder = Recorder(Path(f"{stem}.jsonl"), meta)
        session.listener = recorder.record
    return SessionFiles(stem, recorder, meta)


class SessionFiles:
    """The files of one session: recording, job log, summary."""

    def __init__(self, stem: Path, recorder: Recorder | None, meta: dict[str, Any]) -> None:
        self.stem = stem
        self.recorder = recorder
        self.meta = meta
        self.log = Path(f"{stem}.log")

    def finish(self, session: Session) -> list[Path]:
        """Close the recording and write the summary next to it (on every way out)."""
        if self.recorder is None:
            return []
        session.listener = None
        self.recorder.close()
        return write_all(session, self.meta, self.recorder.path)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # after an SSH drop there is no terminal to write to
        print(f"gputop-train: {text}", file=sys.stderr)


def _launch(
    args: argparse.Namespace, command: list[str], session: Session, files: SessionFiles, output: Any
) -> tuple[LaunchedJob, Monitor] | None:
    """Start the job and its monitor; None (having said why) when the job cannot start."""
    try:
        process = start_job(command, stdout=output, stderr=output, schedule=args.schedule)
    except LaunchError as error:
        _say(str(error))
        files.finish(session)
        return None
    monitor = Monitor(session, process.pid, window_s=args.window)
    monitor.start()
    _start_pilot(args, monitor)
    return LaunchedJob(process), monitor


def _start_pilot(args: argparse.Namespace, monitor: Monitor) -> None:
    if args.autopilot or args.tries:
        monitor.start_pilot(args.tries, budget_s=60.0 * args.autopilot_budget)


def _run_headless(
    args: argparse.Namespace, session: Session, files: SessionFiles, job: Job, monitor: Monitor
) -> int:
    from ..headless import run_headless

    snap = session.snapshot()
    if snap.nvml_error:
        _say(f"GPU figures are N/A: {snap.nvml_error}")
    code = run_headless(job, monitor, args.interval, args.window, args.format == "json")
    for path in files.finish(session):
        _say(f"wrote {path}")
    return code


def _run_tui(
    args: argparse.Namespace,
    session: Session,
    files: SessionFiles,
    job: Job,
    monitor: Monitor,
    log: LogTail | None,
) -> int:
    """``log`` is the job's output file: ours when we launched it, none when attached."""
    from ..tui.app import GputopApp

    job_watch = _watch_job_end(job, monitor, log)
    app = GputopApp(
        session.snapshot,
        job_pid=job.pid,
        log=LogTail(log.path) if log is not None else None,
        refresh_s=max(0.1, args.refresh),
        window_s=args.window,
        screenshot_dir=str(files.stem.parent),
        request_knob=monitor.request_knob,
        scan_syncs=monitor.scan_syncs,
        toggle_autopilot=monitor.toggle_autopilot,
    )
    # An SSH drop (SIGHUP) or a SIGTERM ends the monitor, never the job (its own session).
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, lambda signum, frame: app.exit("leave"))
    choice = app.run()
    code = 0
    if choice == "leave" and job.running():
        where = f"; its output goes to {files.log}" if log is not None else ""
        _say(f"job PID {job.pid} keeps running{where} (gputop-train attach {job.pid})")
    else:
        if job.running():  # "stop", or the app ended some other way (a crash)
            job.stop()
        # The watcher reads the job's last frames and records its end, while the monitor
        # still runs: only then is the session complete enough to summarise.
        job_watch.join(timeout=20.0)
        code = session.snapshot().job.exit_code or 0
    monitor.stop()
    written = files.finish(session)
    for path in [files.log, *written] if log is not None else written:
        _say(f"wrote {path}")
    return code


def _watch_job_end(job: Job, monitor: Monitor, log: LogTail | None) -> threading.Thread:
    """In a thread: when the job exits, collect its last frames and mark the session."""

    def wait() -> None:
        code = job.wait()
        monitor.drain(3.0)
        tail: tuple[str, ...] = ()
        if log is not None:
            log.read_new()
            tail = log.last(20)
        monitor.session.job_ended(code, tail)

    thread = threading.Thread(target=wait, name="gputop-train-job", daemon=True)
    thread.start()
    return thread
