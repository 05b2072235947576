"""Command line: ``gputop-train [OPTIONS] SCRIPT [ARGS...]`` or ``[OPTIONS] -- COMMAND``."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from . import __version__
from .joblog import LogTail, default_log_path
from .launch import LaunchError, build_command, exit_status, start_job, stop_job, watch_job_end
from .monitor import Monitor
from .session.model import DEFAULT_WINDOW_S, Session

EPILOG = """examples:
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
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


def _run_headless(args: argparse.Namespace, command: list[str]) -> int:
    from .headless import run_headless

    session = Session(command=tuple(command))
    try:
        job = start_job(command, stdout=sys.stderr, stderr=sys.stderr, schedule=args.schedule)
    except LaunchError as error:
        print(f"gputop-train: {error}", file=sys.stderr)
        return 2
    monitor = Monitor(session, job.pid)
    monitor.start()
    snap = session.snapshot()
    if snap.nvml_error:
        print(f"gputop-train: GPU figures are N/A: {snap.nvml_error}", file=sys.stderr)
    return run_headless(job, monitor, args.interval, args.window, args.format == "json")


if __name__ == "__main__":
    sys.exit(main())


def _run_tui(args: argparse.Namespace, command: list[str]) -> int:
    from .tui.app import GputopApp

    session = Session(command=tuple(command))
    log_path = default_log_path(command)
    with log_path.open("ab") as log_file:  # the job writes here: no pipe to break on quit
        try:
            job = start_job(command, stdout=log_file, stderr=log_file, schedule=args.schedule)
        except LaunchError as error:
            print(f"gputop-train: {error}", file=sys.stderr)
            return 2
    monitor = Monitor(session, job.pid)
    monitor.start()
    watch_job_end(job, monitor, LogTail(log_path))
    app = GputopApp(
        session.snapshot,
        job_pid=job.pid,
        log=LogTail(log_path),
        refresh_s=max(0.1, args.refresh),
        window_s=args.window,
        screenshot_dir=str(log_path.parent),
        request_knob=monitor.request_knob,
        scan_syncs=monitor.scan_syncs,
    )
    # An SSH drop (SIGHUP) ends the monitor, never the job: it runs in its own session.
    signal.signal(signal.SIGHUP, lambda signum, frame: app.exit("leave"))
    choice = app.run()
    monitor.stop()
    print(f"gputop-train: the job's output is in {log_path}", file=sys.stderr)
    if choice == "leave" and job.poll() is None:
        print(f"gputop-train: job PID {job.pid} keeps running", file=sys.stderr)
        return 0
    if job.poll() is None:  # "stop", or the app ended some other way (Ctrl+C, a crash)
        stop_job(job)
    return exit_status(job.wait())
