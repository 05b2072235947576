"""The TUI paints at once what it knows, figures as they come (issue 46: a blank screen for
10-14 s at load 7-8.5): its frame, the job starting and NVML's status before the job's first
step; and it is imported before the monitor yields the CPU to the job (cli/run.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from gputop_train import events
from gputop_train.session.model import Session
from gputop_train.tui.widgets.live_text import LiveText
from tests.support.clock import ManualClock
from tests.support.sessions import JOB_PID, NOW
from tests.support.tui import app_under_test, tick


async def test_the_first_frame_says_the_job_is_starting_and_what_nvml_said() -> None:
    clock = ManualClock(NOW)
    session = Session(command=("python", "train.py"), clock=clock, started_at=NOW)
    session.apply(
        events.GpusFound((), error="no NVIDIA driver here (NVML Shared Library Not Found)")
    )
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()  # the mount's own frame: no tick yet
        header = app.query_one("#header", LiveText).text.plain
        assert "python train.py" in header and f"PID {JOB_PID}" in header
        assert "no NVIDIA driver" in app.query_one("#gpus", LiveText).text.plain
        findings = app.query_one("#findings", LiveText).text.plain
        assert "no training step seen yet" in findings
        clock.now = NOW + 2.0  # the job's first steps: figures as they come
        session.apply(events.ProcessHello.of(JOB_PID, {"argv": ["train.py"], "torch": "2.11"}))
        rows = [
            [n, NOW + 1.0 + n * 0.1, 100.0, 5.0, 32, 1, 90.0, None, None, None]
            for n in range(1, 10)
        ]
        session.apply(events.StepRows(JOB_PID, tuple(rows)))
        await tick(app, pilot)
        steps = app.query_one("#steps", LiveText).text.plain
        assert "steps/s" in steps and "N/A steps/s" not in steps


def test_the_tui_is_imported_before_the_monitor_yields_the_cpu() -> None:
    """At nice 10 beside busy loops, Textual's import took 2.1 s of a 3.0-s blank screen."""
    code = textwrap.dedent(
        """
        import argparse, io, sys
        from gputop_train.cli import run

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        seen = []
        run.yield_to_job = lambda pid: seen.append("gputop_train.tui.app" in sys.modules)

        class Stop(Exception):
            pass

        def no_monitor(*args, **kwargs):
            raise Stop

        run.Monitor = no_monitor
        sys.stdout = Terminal()
        args = argparse.Namespace(no_nice=False, headless=False, window=10.0)
        try:
            run._start_monitor(args, None, 1)
        except Stop:
            pass
        sys.__stdout__.write(repr(seen))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout == "[True]", out.stderr
