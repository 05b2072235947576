"""Command line: ``gputop-train [OPTIONS] SCRIPT [ARGS...]`` or ``[OPTIONS] -- COMMAND``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__, wire
from .autopilot.plan import parse_settings
from .collect.stacks import WINDOW_S as STACK_WINDOW_S
from .collect.stacks import StackSampler, StacksUnavailable
from .joblog import LogTail
from .launch import Job, LaunchedJob, LaunchError, build_command, start_job, watch_job_end
from .monitor import Monitor
from .record.paths import new_session_stem
from .record.recorder import Recorder
from .record.summary import write_all
from .session.model import DEFAULT_WINDOW_S, Session

EPILOG = """commands:
  gputop-train attach PID [OPTIONS]              monitor a running job (one left running)
  gputop-train summary FILE [--format md|json]   the summary of a recorded session
  gputop-train replay FILE                       the TUI on a recording, with a time cursor
  gputop-train sessions                          past recordings and their headline figures

examples:
  gputop-train demos/resnet.py --workers 8          monitor a Python script (TUI)
  gputop-train --headless demos/resnet.py           one status line per second
  gputop-train --headless --format json train.py    one JSON object per interval
  gputop-train -- torchrun --nproc-per-node 2 train.py   any command, after --
"""


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gputop-train",
        description="See, live, why a PyTorch training run is not using its GPU fully.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gputop-train {__version__}")
    _add_monitor_options(parser)
    parser.add_argument(
        "--schedule",
        type=parse_schedule,
        default=[],
        metavar='"STEP:knob=value[;knob=value],..."',
        help="knob changes applied at given step numbers, e.g. 100:num_workers=8,200:compile=true",
    )
    parser.add_argument("target", nargs=argparse.REMAINDER, help="SCRIPT [ARGS...] or -- COMMAND")
    args = parser.parse_args(argv)
    if args.schedule and (args.autopilot or args.tries):
        parser.error("--schedule changes knobs itself: use it without --autopilot and --try")
    args.raw_command = bool(args.target) and args.target[0] == "--"
    if args.raw_command:
        args.target = args.target[1:]
    if not args.target:
        parser.error("give a script to run (gputop-train train.py) or -- COMMAND")
    return args


def parse_attach_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gputop-train attach",
        description=(
            "Monitor a running job: one started by gputop-train or hooked by its script, or "
            "any Python training process, sampled with py-spy"
        ),
    )
    parser.add_argument("pid", type=int, help="the job's PID (torchrun's: all its ranks)")
    parser.add_argument(
        "--stack-window",
        type=_positive,
        default=STACK_WINDOW_S,
        help=f"a job without the hook: seconds per py-spy window ({STACK_WINDOW_S:g})",
    )
    _add_monitor_options(parser)
    return parser.parse_args(argv)


def _add_monitor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--headless", action="store_true", help="no TUI: print a status line per interval"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="headless output format"
    )
    parser.add_argument(
        "--interval", type=_positive, default=1.0, help="seconds between headless lines (1)"
    )
    parser.add_argument(
        "--window",
        type=_positive,
        default=DEFAULT_WINDOW_S,
        help=f"seconds of history behind each live figure ({DEFAULT_WINDOW_S:g})",
    )
    parser.add_argument(
        "--refresh",
        type=_positive,
        default=0.5,
        help="seconds between TUI redraws (0.5 = 2 Hz; at least 0.1, the GPU sample rate)",
    )
    parser.add_argument(
        "--record", metavar="PATH", help="write the session recording here (.jsonl)"
    )
    parser.add_argument("--no-record", action="store_true", help="do not record the session")
    pilot = parser.add_mutually_exclusive_group()
    pilot.add_argument(
        "--autopilot",
        action="store_true",
        help="follow the advice on the script's declared knobs: try, measure, keep or revert",
    )
    pilot.add_argument(
        "--try",
        dest="tries",
        action="append",
        type=_settings,
        default=[],
        metavar='"knob=value[;knob=value]"',
        help="measure this change against the baseline, then revert it (repeatable)",
    )
    parser.add_argument(
        "--autopilot-budget",
        type=_positive,
        default=10.0,
        metavar="MIN",
        help="minutes the autopilot may spend trying changes (10)",
    )


def parse_schedule(text: str) -> list[tuple[int, dict[str, str]]]:
    """``"100:num_workers=8;pin_memory=true,300:compile=true"`` -> [(100, {...}), (300, {...})]."""
    entries = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        step_text, _, settings_text = part.partition(":")
        try:
            step = int(step_text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: expected STEP:knob=value") from None
        settings = {}
        for setting in filter(None, settings_text.split(";")):
            name, equals, value = setting.partition("=")
            if not equals or not name.strip():
                raise argparse.ArgumentTypeError(f"{setting!r}: expected knob=value")
            settings[name.strip()] = value.strip()
        if step < 0 or not settings:
            raise argparse.ArgumentTypeError(f"{part!r}: expected STEP:knob=value")
        entries.append((step, settings))
    return entries


def _settings(text: str) -> tuple[tuple[str, str], ...]:
    try:
        return parse_settings(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


SUBCOMMANDS = ("summary", "replay", "sessions")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        from .sessions_cli import run_subcommand

        return run_subcommand(argv)
    if argv and argv[0] == "attach":
        return _attach(parse_attach_args(argv[1:]))
    args = parse_args(argv)
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


def _attach(args: argparse.Namespace) -> int:
    from .attach import AttachError, find_job, no_hook_advice

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
    from .headless import run_headless

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
    from .tui.app import GputopApp

    job_watch = watch_job_end(job, monitor, log)
    app = GputopApp(
        session.snapshot,
        job_pid=job.pid,
        log=LogTail(log.path) if log is not None else None,
        refresh_s=max(0.1, args.refresh),
        window_s=args.window,
        screenshot_dir=str(files.stem.parent),
        request_knob=monitor.request_knob,
        scan_syncs=monitor.scan_syncs,
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


if __name__ == "__main__":
    sys.exit(main())
