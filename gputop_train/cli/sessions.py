"""``gputop-train summary | replay | sessions``: working with recorded sessions.

Each takes whatever a recording holds: bad lines and events are skipped and counted, never a
traceback; nothing readable at all is a one-line refusal and exit 2. ``summary`` prints and
writes nothing beside the recording unless asked (``--write``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import format as fmt
from .. import wire
from ..record.paths import sessions_dir
from ..record.reader import Recording, UnreadableRecording, read, replay_all
from ..record.summary import markdown, summarize, write_all


def run_subcommand(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="gputop-train")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="a recorded session's summary")
    summary.add_argument("file", type=Path)
    summary.add_argument("--format", choices=("md", "json"), default="md")
    summary.add_argument(
        "--write", action="store_true", help="also write .summary.md/.json/.svg beside it"
    )
    replay = commands.add_parser("replay", help="the TUI on a recording, with a time cursor")
    replay.add_argument("file", type=Path)
    commands.add_parser("sessions", help="list past recordings")
    args = parser.parse_args(argv)
    try:
        if args.command == "sessions":
            return list_sessions(sessions_dir())
        try:
            recording = _load(args.file)
        except FileNotFoundError:
            _say(f"no recording at {args.file} (gputop-train sessions lists them)")
            return 2
        except (OSError, UnreadableRecording) as error:
            _say(str(error))
            return 2
        if args.command == "summary":
            return print_summary(recording, args.format, args.write)
        return run_replay(recording)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        _silence_stdout()
        return 0


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        print(f"gputop-train: {text}", file=sys.stderr)


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _load(path: Path) -> Recording:
    recording = read(path)
    if recording.skipped_lines:
        lines = ", ".join(map(str, recording.skipped_lines[:10]))
        more = "…" if len(recording.skipped_lines) > 10 else ""
        _say(
            f"warning: skipped {len(recording.skipped_lines)} unreadable line(s) of {path} "
            f"(line {lines}{more}); the rest is used"
        )
    if recording.skipped_figures:
        _say(f"warning: read {recording.skipped_figures} non-finite or absurd figure(s) of "
             f"{path} as N/A")  # fmt: skip
    return recording


def _replayed(recording: Recording) -> Any:
    session = replay_all(recording)
    if recording.skipped_events:
        _say(f"warning: skipped {recording.skipped_events} event(s) that make no sense")
    return session


def print_summary(recording: Recording, output: str, write: bool = False) -> int:
    session = _replayed(recording)
    summary = summarize(session, recording.meta)
    chart = recording.path.with_suffix(".svg").name
    if output == "json":
        print(json.dumps(summary, indent=2))
    else:
        print(markdown(summary, chart if write else None))
    if write:
        written, problems = write_all(session, recording.meta, recording.path)
        for path in written:
            _say(f"wrote {path}")
        for problem in problems:
            _say(problem)
    return 0


def run_replay(recording: Recording) -> int:
    from ..record.files import save_screenshot
    from ..record.replay import ReplayController
    from ..tui.app import create_app
    from ..tui.boundary import AppOptions

    controller = ReplayController(recording)
    stem = recording.path.with_suffix("")
    options = AppOptions(save_screenshot=lambda svg: save_screenshot(stem, svg, time.time()))
    create_app(controller.snapshot, options, timeline=controller).run()
    return 0


def list_sessions(directory: Path) -> int:
    """Hooked jobs running now (to attach to), then past recordings, newest first."""
    running = _running_jobs()
    if running:
        print("running now, hooked (watch one with gputop-train attach PID):")
        for pid, command in running:
            print(f"  {pid:>7}  {' '.join(command)[:100]}")
        print()
    recordings = sorted(directory.glob("*.jsonl"), reverse=True) if directory.is_dir() else []
    if not recordings:
        print(f"no recorded sessions in {directory}")
        return 0
    print(f"{'recording':<48} {'duration':>8} {'steps':>7} {'samples/s':>10} {'exit':>5}  command")
    for path in recordings:
        print(_session_line(path))
    print(
        "\nsteps: those the recording holds, as its summary counts them (from an attach, the "
        "steps since it)\na page with plots: gputop-train report FILE; two side by side: "
        "gputop-train compare A B"
    )
    return 0


def _running_jobs() -> list[tuple[int, list[str]]]:
    """Hooked jobs running now; none where the runtime directory cannot be trusted (the
    recordings are still listed; ``attach`` says what is wrong with it)."""
    from ..job.attached import hooked_jobs

    try:
        return hooked_jobs()
    except (wire.UnsafeRuntimeDir, OSError):
        return []


def _session_line(path: Path) -> str:
    summary_path = path.with_suffix(".summary.json")
    if not summary_path.is_file():
        return f"{path.name:<48} no summary yet: gputop-train summary --write {path}"
    try:
        summary = json.loads(summary_path.read_text())
        figures = summary["figures"]
        code = summary["exit_code"]
        total, before = figures["total_steps"], summary.get("steps_before_start") or 0
        attached = 0 < before <= total  # steps_text's rule: the summary counts from the attach
        steps = total - before if attached else total
        command = " ".join(summary["command"])
        if attached:
            command = f"(attached at the job's step {before}) {command}"
        return (
            f"{path.name:<48} {fmt.duration(summary['duration_s']):>8} "
            f"{steps:>7} {fmt.rate(figures['samples_per_s'], ''):>10} "
            f"{code if code is not None else 'N/A':>5}  {command[:60]}"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return f"{path.name:<48} unreadable summary: gputop-train summary --write {path}"
