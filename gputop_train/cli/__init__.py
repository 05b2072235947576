"""Command line: ``gputop-train [OPTIONS] SCRIPT [ARGS...]`` or ``[OPTIONS] -- COMMAND``."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence

from .. import __version__, wire
from ..autopilot.plan import parse_settings
from ..samples import STACK_WINDOW_S
from ..session.model import DEFAULT_WINDOW_S

EPILOG = """commands:
  gputop-train attach PID [OPTIONS]              monitor a running job (one left running)
  gputop-train summary FILE [--format md|json]   the summary of a recorded session
  gputop-train replay FILE                       the TUI on a recording, with a time cursor
  gputop-train sessions                          past recordings and their headline figures
  gputop-train report FILE [-o report.html]      one self-contained HTML page with plots
  gputop-train compare A B [--format text|md|json]   two recordings side by side
  gputop-train check --steps N [--baseline FILE] SCRIPT   CI: fail on a regression
  gputop-train job --prometheus URL | --from URL,URL   the whole job across its nodes

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
    parser.add_argument("-V", "--version", action="version", version=f"gputop-train {__version__}")
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
    parser.add_argument("pid", type=_pid, help="the job's PID (torchrun's: all its ranks)")
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
        default=wire.SEND_PERIOD_S,
        help=f"seconds between TUI redraws ({wire.SEND_PERIOD_S:g}: as often as the hook sends "
        "its steps (wire.SEND_PERIOD_S) and GPU samples arrive; at least 0.1)",
    )
    parser.add_argument(
        "--record", metavar="PATH", help="write the session recording here (.jsonl)"
    )
    parser.add_argument("--no-record", action="store_true", help="do not record the session")
    parser.add_argument(
        "--prometheus",
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (HOST 127.0.0.1 unless "
        "given; docs/prometheus.md)",
    )
    parser.add_argument(
        "--prometheus-tls",
        nargs=2,
        type=_pem_file,
        metavar=("CERT", "KEY"),
        help="serve the metrics over HTTPS with this certificate and key (PEM files)",
    )
    parser.add_argument(
        "--prometheus-client-ca",
        type=_pem_file,
        metavar="CA",
        help="with --prometheus-tls: only scrapers holding a certificate signed by this CA may "
        "read the metrics (other local users included)",
    )
    parser.add_argument(
        "--job",
        "--prometheus-job",
        dest="prometheus_job",
        metavar="NAME",
        help="the job's name in the metrics (train_job; default: the script's name and "
        "torchrun's --rdzv-id or SLURM_JOB_ID); give every node's monitor of one job the same "
        "name, and two jobs different ones",
    )
    parser.add_argument(
        "--node",
        metavar="NAME",
        help="this node's name in the metrics (default: SLURM_NODEID, torchrun's --node-rank, "
        "else the host name)",
    )
    parser.add_argument(
        "--prometheus-linger",
        type=float,
        default=None,
        metavar="S",
        help="after the job ends, keep serving its final metrics (job_running 0, its exit "
        "code, which ranks are gone) for S seconds so that a scrape sees them (default: "
        "after a job that ended by itself, until one scrape has read them, at most 30 s)",
    )
    parser.add_argument(
        "--stall-after",
        type=_positive,
        default=120.0,
        metavar="S",
        help="once no rank has finished a step for S seconds, write each rank's Python stacks "
        "and the collective it waits in beside the recording, and name the ranks that did not "
        "arrive (120; the TUI's D key dumps at any time; docs/ranks.md)",
    )
    parser.add_argument(
        "--no-nice",
        action="store_true",
        help="keep the monitor at the job's CPU and I/O priority (by default it yields: "
        "nice +10 below the job, idle I/O class)",
    )
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


def _pem_file(text: str) -> str:
    """A file the TLS options read: refused at once unless a regular file. A FIFO or a device
    would be opened and read by ssl at start-up, holding the launch for ever (issue 39)."""
    try:
        mode = os.stat(text).st_mode
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = _file_kind(mode)
        raise argparse.ArgumentTypeError(f"{text} is {kind}, not a file: give a PEM file")
    return text


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _pid(text: str) -> int:
    """A process ID: a whole number from 1 (``attach -5`` printed psutil's traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a PID (ps lists them)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a PID: PIDs start at 1 (ps lists them)")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


SUBCOMMANDS = ("summary", "replay", "sessions")
REPORT_COMMANDS = ("report", "compare", "check")  # cli/reports.py


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        from .sessions import run_subcommand

        return run_subcommand(argv)
    if argv and argv[0] in REPORT_COMMANDS:
        from .reports import run_subcommand as run_report_command

        return run_report_command(argv)
    if argv and argv[0] == "job":
        from .job import run_job

        return run_job(argv[1:])
    from .run import attach, launch

    if argv and argv[0] == "attach":
        return attach(parse_attach_args(argv[1:]))
    return launch(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
