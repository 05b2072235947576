"""``gputop-train summary | replay | sessions``: working with recorded sessions."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import format as fmt
from ..record.paths import sessions_dir
from ..record.reader import Recording, UnreadableRecording, read, replay_all
from ..record.summary import markdown, summarize, write_all


def run_subcommand(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="gputop-train")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="rebuild a session's summary from its JSONL")
    summary.add_argument("file", type=Path)
    summary.add_argument("--format", choices=("md", "json"), default="md")
    replay = commands.add_parser("replay", help="the TUI on a recording, with a time cursor")
    replay.add_argument("file", type=Path)
    commands.add_parser("sessions", help="list past recordings")
    args = parser.parse_args(argv)
    if args.command == "sessions":
        return list_sessions(sessions_dir())
    try:
        recording = _load(args.file)
    except (OSError, UnreadableRecording) as error:
        print(f"gputop-train: {error}", file=sys.stderr)
        return 2
    if args.command == "summary":
        return print_summary(recording, args.format)
    return run_replay(recording)


def _load(path: Path) -> Recording:
    recording = read(path)
    if recording.skipped_lines:
        lines = ", ".join(map(str, recording.skipped_lines[:10]))
        more = "…" if len(recording.skipped_lines) > 10 else ""
        print(
            f"gputop-train: warning: skipped {len(recording.skipped_lines)} unreadable line(s) "
            f"of {path} (line {lines}{more}); the rest is used",
            file=sys.stderr,
        )
    return recording


def print_summary(recording: Recording, output: str) -> int:
    session = replay_all(recording)
    written = write_all(session, recording.meta, recording.path)
    summary = summarize(session, recording.meta)
    if output == "json":
        print(json.dumps(summary, indent=2))
    else:
        print(markdown(summary, written[2].name))
    print(f"gputop-train: wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def run_replay(recording: Recording) -> int:
    from ..record.replay import ReplayController
    from ..tui.app import GputopApp

    controller = ReplayController(recording)
    GputopApp(controller.snapshot, replay=controller).run()
    return 0


def list_sessions(directory: Path) -> int:
    recordings = sorted(directory.glob("*.jsonl"), reverse=True) if directory.is_dir() else []
    if not recordings:
        print(f"no recorded sessions in {directory}")
        return 0
    print(f"{'recording':<48} {'duration':>8} {'steps':>7} {'samples/s':>10} {'exit':>5}  command")
    for path in recordings:
        summary_path = path.with_suffix(".summary.json")
        if summary_path.is_file():
            summary = json.loads(summary_path.read_text())
            figures = summary["figures"]
            print(
                f"{path.name:<48} {fmt.duration(summary['duration_s']):>8} "
                f"{figures['total_steps']:>7} {fmt.rate(figures['samples_per_s'], ''):>10} "
                f"{summary['exit_code'] if summary['exit_code'] is not None else 'N/A':>5}  "
                f"{' '.join(summary['command'])[:60]}"
            )
        else:
            print(f"{path.name:<48} no summary yet: gputop-train summary {path}")
    return 0
