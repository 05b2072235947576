"""``gputop-train job``: the whole job across its nodes, from a Prometheus server or from the
nodes' exporters (docs/jobs.md); ``gputop-train job report FILE``: a recording of it."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path

from ..jobview.exporters import ExporterSource, parse_urls
from ..jobview.figures import SourceError
from ..jobview.judge import DEFAULT_WINDOW_S, JobHistory
from ..jobview.prometheus import PrometheusSource
from ..jobview.report import ReportError, report
from ..jobview.watch import JobWatch, Source, run_headless

EPILOG = """examples:
  gputop-train job --prometheus http://prometheus:9090 --job train-4711
  gputop-train job --from gpu-node-1:9455,gpu-node-2:9455 --headless
  gputop-train job --from node1:9455,node2:9455 --headless --format json --record job.jsonl
  gputop-train job report job.jsonl
"""


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        print(f"gputop-train job: {text}", file=sys.stderr)


def parse_job_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gputop-train job",
        description="The whole job across its nodes: a row per node, the slow rank and its node",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--prometheus", metavar="URL", help="read the job from this Prometheus server (PromQL)"
    )
    where.add_argument(
        "--from",
        dest="exporters",
        metavar="URL,URL,...",
        help="read the nodes' exporters directly (each node's gputop-train --prometheus)",
    )
    parser.add_argument(
        "--job", metavar="NAME", help="the job (train_job); default: the one running"
    )
    parser.add_argument("--headless", action="store_true", help="no TUI: a line per interval")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--detail",
        choices=("headline", "nodes", "ranks"),
        default="headline",
        help="headless text: the headline line, plus a line per node, plus one per rank",
    )
    parser.add_argument("--interval", type=_positive, default=2.0, help="seconds (2)")
    parser.add_argument(
        "--window",
        type=_positive,
        default=DEFAULT_WINDOW_S,
        help="the nodes' monitors' --window: the verdict's windows are at least this far apart; "
        f"with Prometheus, raised to its scrape interval where shorter ({DEFAULT_WINDOW_S:g})",
    )
    parser.add_argument("--count", type=int, default=None, help="stop after N lines")
    parser.add_argument("--record", type=Path, metavar="PATH", help="record each view (JSONL)")
    return parser.parse_args(argv)


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def run_job(argv: Sequence[str]) -> int:
    """``gputop-train job ...``."""
    if argv and argv[0] == "report":
        return _report(argv[1:])
    args = parse_job_args(argv)
    try:
        source: Source = (
            PrometheusSource(args.prometheus, args.job)
            if args.prometheus
            else ExporterSource(parse_urls(args.exporters), args.job)
        )
    except SourceError as error:
        _say(str(error))
        return 2
    window = args.window
    if isinstance(source, PrometheusSource):
        window = _no_shorter_than_scrapes(source, window)
    watch = JobWatch(source, JobHistory(window), args.record)
    try:
        if args.headless or args.format == "json" or not sys.stdout.isatty():
            return run_headless(
                watch, args.interval, args.format == "json", args.detail, args.count
            )
        from ..jobview.tui import run_tui

        return run_tui(watch, args.interval)
    finally:
        watch.close()


def _no_shorter_than_scrapes(source: PrometheusSource, window: float) -> float:
    """The window, raised to Prometheus's scrape interval where shorter, said in a line: a
    node's figures move only at its scrape, so a shorter window would hold no new scrape of
    some nodes, whose ranks would go unjudged. Raised, not refused: the default 10 s is under
    a site's usual 15-60 s, and the user's intent (windows as short as can be) is kept."""
    try:
        scrape = source.scrape_interval_s()
    except SourceError:
        return window
    if scrape is None or window >= scrape:
        return window
    _say(
        f"--window {window:g} s is shorter than Prometheus's scrape interval ({scrape:g} s): "
        f"windows of {scrape:g} s (a shorter one misses some nodes' scrapes)"
    )
    return scrape


def _report(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gputop-train job report", description="a recorded job view: what it named, when"
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        print(report(args.file, args.format))
    except ReportError as error:
        _say(str(error))
        return 2
    return 0
