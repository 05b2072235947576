"""Command line: ``gputop-train [OPTIONS] SCRIPT [ARGS...]`` or ``[OPTIONS] -- COMMAND``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .joblog import LogTail
from .launch import LaunchError, build_command, exit_status, start_job, stop_job, watch_job_end
from .monitor import Monitor
from .record.paths import new_session_stem
from .record.recorder import Recorder
from .record.summary import write_all
from .session.model import DEFAULT_WINDOW_S, Session

EPILOG = """commands:
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
        "--schedule",
        type=parse_schedule,
        default=[],
        metavar='"STEP:knob=value[;knob=value],..."',
        help="knob changes applied at given step numbers, e.g. 100:num_workers=8,200:compile=true",
    )
    parser.add_argument(
        "--record", metavar="PATH", help="write the session recording here (.jsonl)"
    )
    parser.add_argument("--no-record", action="store_true", help="do not record the session")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="SCRIPT [ARGS...] or -- COMMAND")
    args = parser.parse_args(argv)
    args.raw_command = bool(args.target) and args.target[0] == "--"
    if args.raw_command:
        args.target = args.target[1:]
    if not args.target:
        parser.error("give a script to run (gputop-train train.py) or -- COMMAND")
    return args


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
    args = parse_args(argv)
    try:
        command = build_command(args.target, args.raw_command)
    except LaunchError as error:
        print(f"gputop-train: {error}", file=sys.stderr)
        return 2
    if args.headless or not sys.stdout.isatty():
        if not args.headless:
            print("gputop-train: stdout is not a terminal: running headless", file=sys.stderr)
        return _run_headless(args, command)
    return _run_tui(args, command)


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
) -> tuple[subprocess.Popen[bytes], Monitor] | None:
    """Start the job and its monitor; None (having said why) when the job cannot start."""
    try:
        job = start_job(command, stdout=output, stderr=output, schedule=args.schedule)
    except LaunchError as error:
        _say(str(error))
        files.finish(session)
        return None
    monitor = Monitor(session, job.pid)
    monitor.start()
    return job, monitor


def _run_headless(args: argparse.Namespace, command: list[str]) -> int:
    from .headless import run_headless

    session = Session(command=tuple(command))
    files = _open_record(args, command, session)
    launched = _launch(args, command, session, files, output=sys.stderr)
    if launched is None:
        return 2
    job, monitor = launched
    snap = session.snapshot()
    if snap.nvml_error:
        _say(f"GPU figures are N/A: {snap.nvml_error}")
    code = run_headless(job, monitor, args.interval, args.window, args.format == "json")
    for path in files.finish(session):
        _say(f"wrote {path}")
    return code


def _run_tui(args: argparse.Namespace, command: list[str]) -> int:
    from .tui.app import GputopApp

    session = Session(command=tuple(command))
    files = _open_record(args, command, session)
    with files.log.open("ab") as log_file:  # the job writes here: no pipe to break on quit
        launched = _launch(args, command, session, files, output=log_file)
    if launched is None:
        return 2
    job, monitor = launched
    job_watch = watch_job_end(job, monitor, LogTail(files.log))
    app = GputopApp(
        session.snapshot,
        job_pid=job.pid,
        log=LogTail(files.log),
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
    if choice == "leave" and job.poll() is None:
        _say(f"job PID {job.pid} keeps running; its output goes to {files.log}")
        code = 0
    else:
        if job.poll() is None:  # "stop", or the app ended some other way (a crash)
            stop_job(job)
        code = exit_status(job.wait())
        # The watcher reads the job's last frames and records its end, while the monitor
        # still runs: only then is the session complete enough to summarise.
        job_watch.join(timeout=5.0)
    monitor.stop()
    for path in [files.log, *files.finish(session)]:
        _say(f"wrote {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
