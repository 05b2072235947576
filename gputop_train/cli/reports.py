"""``gputop-train report | compare | check``: a recording as an HTML page, two side by side,
and a CI gate. Bad input is a one-line message and exit 2, as for ``summary``."""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..record.reader import UnreadableRecording
from ..reports.box import MAX_LOAD_CHANGE_PCT

if TYPE_CHECKING:
    from ..reports.load import Run

COMMANDS = ("report", "compare", "check")
N = TypeVar("N", int, float)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        print(f"gputop-train: {text}", file=sys.stderr)


def _argument(
    convert: Callable[[str], N], example: str, ok: Callable[[N], bool], bound: str
) -> Callable[[str], N]:
    """An option's type: ``convert`` the text (said with ``example`` when it cannot be), then
    hold the value to ``ok`` (said with ``bound``)."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {example}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {bound}")
        return value

    return parse


# ``5%`` or ``5`` -> 5.0.
percent = _argument(
    lambda text: float(text.strip().rstrip("%")),
    "a percentage, e.g. 5%",
    lambda value: math.isfinite(value) and value >= 0,
    "a percentage of 0% or more",
)
# A finite number above 0: a bound of nan or inf would be no bound at all.
positive = _argument(
    float,
    "a number, e.g. 250",
    lambda value: math.isfinite(value) and value > 0,
    "a finite number above 0",
)
count = _argument(
    int, "a whole number, e.g. 200", lambda value: value > 0, "a whole number above 0"
)


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip


def size(text: str) -> int:
    """``24GiB``, ``500MB``, ``1e9`` -> bytes."""
    match = re.fullmatch(r"\s*([0-9.e+]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size, e.g. 24GiB or 500MB")
    try:
        value = float(match.group(1)) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size, e.g. 24GiB") from None
    if not math.isfinite(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite size, 1 byte or more")
    return int(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gputop-train")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report", help="a recording as one self-contained HTML file with plots"
    )
    report.add_argument("file", type=Path)
    report.add_argument("-o", "--output", type=Path, help="where (default: FILE.report.html)")
    comparing = commands.add_parser("compare", help="two recordings side by side")
    comparing.add_argument("a", type=Path, help="the run before (the baseline)")
    comparing.add_argument("b", type=Path, help="the run after")
    comparing.add_argument("--format", choices=("text", "md", "json"), default="text")
    check = commands.add_parser(
        "check",
        help="CI: run a script headless, fail on a regression against a baseline or bounds",
        description="Run SCRIPT (or -- COMMAND) headless under the monitor, recorded, then "
        "judge it. Exit 0: passed; 1: a regression or a bound broken; 2: could not run.",
    )
    budget = check.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=count, help="stop the job after N steps")
    budget.add_argument("--seconds", type=positive, help="stop the job after S seconds")
    check.add_argument("--baseline", type=Path, help="a recording of the reference run")
    check.add_argument(
        "--max-regression", type=percent, default=5.0, metavar="PCT",
        help="fail when a figure is worse than the baseline's by more than this and its "
        "noise (5%%)",
    )  # fmt: skip
    check.add_argument("--max-memory", type=size, metavar="SIZE", help="e.g. 24GiB")
    check.add_argument(
        "--max-load-change", type=percent, default=MAX_LOAD_CHANGE_PCT, metavar="PCT",
        help="refuse to judge against the baseline (exit 2) when the cores other processes "
        "left free differ by more than this on a machine with no idle core (25%%)",
    )  # fmt: skip
    check.add_argument("--min-samples-per-s", type=positive, metavar="N")
    check.add_argument("--max-step-ms", type=positive, metavar="MS", help="step time p50 bound")
    check.add_argument("--record", type=Path, default=Path("gputop-check.jsonl"),
                       help="the run's recording (gputop-check.jsonl)")  # fmt: skip
    check.add_argument("--junit", type=Path, default=Path("gputop-check.xml"))
    check.add_argument("--markdown", type=Path, default=Path("gputop-check.md"))
    check.add_argument("--no-report", action="store_true", help="skip the HTML report")
    check.add_argument("target", nargs=argparse.REMAINDER, help="SCRIPT [ARGS] or -- COMMAND")
    return parser


def run_subcommand(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    from ..reports.check import NotRun
    from ..reports.report import ReportPlaceError

    try:
        if args.command == "report":
            return _report(args)
        if args.command == "compare":
            return _compare(args)
        return _check(args)
    except (NotRun, ReportPlaceError) as error:
        _say(f"{args.command}: {error}")
    except FileNotFoundError as error:
        _say(f"no recording at {error.filename} (gputop-train sessions lists them)")
    except (OSError, UnreadableRecording) as error:
        _say(str(error))
    return 2


def _cannot_launch(target: list[str]) -> str:
    """Why ``target`` cannot start (a script that is not there, a program not on PATH), said
    before the run: the monitor's own message would only reach the check's log."""
    from ..job.launched import LaunchError, build_command

    raw = target[0] == "--"
    if raw and shutil.which(target[1]) is None:
        return f"command not found: {target[1]}"
    try:
        build_command(target[1:] if raw else target, raw)
    except LaunchError as error:
        return str(error)
    return ""


def warn_skipped(run: Run) -> None:
    """What a damaged recording lost, as ``summary`` says it (the rest is used)."""
    recording = run.recording
    if recording.skipped_lines:
        _say(f"warning: skipped {len(recording.skipped_lines)} unreadable line(s) of "
             f"{recording.path}; the rest is used")  # fmt: skip
    if recording.skipped_events:
        _say(f"warning: skipped {recording.skipped_events} event(s) of {recording.path} that "
             "make no sense")  # fmt: skip
    if recording.skipped_figures:
        _say(f"warning: read {recording.skipped_figures} non-finite or absurd figure(s) of "
             f"{recording.path} as N/A")  # fmt: skip


def _report(args: argparse.Namespace) -> int:
    from ..reports.needs import MissingPlotting
    from ..reports.report import write_report

    try:
        path, run = write_report(args.file, args.output)
    except MissingPlotting as error:
        _say(str(error))
        return 2
    warn_skipped(run)
    print(path)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..reports.compare import compare
    from ..reports.compare_format import RENDERERS
    from ..reports.load import load

    a, b = load(args.a), load(args.b)
    warn_skipped(a)
    warn_skipped(b)
    print(RENDERERS[args.format](compare(a, b)), end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..reports import check
    from ..reports.needs import MissingPlotting
    from ..reports.report import write_report

    if not args.target or args.target == ["--"]:
        _say("check: give a script to run (gputop-train check --steps 200 train.py)")
        return 2
    if args.record.exists():
        _say(f"check: {args.record} exists; give a new --record path (recordings are never "
             "appended to)")  # fmt: skip
        return 2
    problem = _cannot_launch(args.target)
    if problem:
        _say(f"check: {problem}")
        return 2
    bounds = check.Bounds(args.max_regression, args.max_memory, args.min_samples_per_s,
                          args.max_step_ms, args.max_load_change)  # fmt: skip
    outcome = check.check(args.target, args.record, args.baseline, bounds, args.steps,
                          args.seconds)  # fmt: skip
    report = None
    if not args.no_report:
        try:
            report = str(write_report(args.record)[0])
        except MissingPlotting as error:
            outcome.notes.append(f"no report: {error}")
    check.write_junit(args.junit, outcome)
    args.markdown.write_text(check.markdown(outcome, report))
    for verdict in outcome.verdicts:
        print(f"{verdict.outcome.upper():7} {verdict.name}: {verdict.message}")
    log = check.log_path(args.record)
    if outcome.verdicts[0].outcome == "failed":  # the job's own error, from its output
        print("".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:]), end="")
    print(f"the job's and the monitor's output: {log}")
    word = "FAILED" if outcome.failed else "NOT JUDGED" if outcome.not_judged else "PASSED"
    print(f"{word}; wrote {args.junit}, {args.markdown}" + (f", {report}" if report else ""))
    if outcome.not_judged and not outcome.failed:
        _say(f"check: {outcome.not_judged}")
        return 2
    return 1 if outcome.failed else 0
