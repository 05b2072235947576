"""The app as the tests build it: through ``create_app``, drawn by hand (no refresh thread)."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from gputop_train.front_end import JobControls, SnapshotSource
from gputop_train.job.log import LogTail
from gputop_train.tui.app import GputopApp, create_app
from gputop_train.tui.boundary import AppOptions, Timeline
from tests.support.sessions import JOB_PID


class AskedControls:
    """A live job's controls that keep what was asked and answer ``knob_error``."""

    def __init__(self, knob_error: str | None = None) -> None:
        self.knob_error = knob_error
        self.asked: list[tuple[str, Any]] = []

    def request_knob(self, name: str, value: Any) -> str | None:
        self.asked.append((name, value))
        return self.knob_error

    def scan_syncs(self) -> str:
        self.asked.append(("scan_syncs", None))
        return "sync scan asked"

    def toggle_autopilot(self) -> str:
        self.asked.append(("autopilot", None))
        return "autopilot toggled"

    def dump_stall(self) -> str:
        self.asked.append(("dump_stall", None))
        return "stall dump asked"


def app_under_test(
    source: SnapshotSource,
    *,
    controls: JobControls | None = None,
    timeline: Timeline | None = None,
    job_pid: int | None = JOB_PID,
    log: LogTail | None = None,
) -> GputopApp:
    """A live job's app (or, with ``timeline``, a replay's) with no refresh thread: it draws
    what ``tick`` posts, and on keys."""
    if timeline is not None:
        job_pid = None
    options = AppOptions(job_pid=job_pid, log=log, auto_refresh=False)
    return create_app(source, options, controls=controls, timeline=timeline)


async def tick(app: GputopApp, pilot: Pilot[Any], ticks: int = 1) -> None:
    """``ticks`` refresh periods as the app's worker makes them: each view posted as a
    ``SnapshotTaken`` message and drawn before the next is taken."""
    for _ in range(ticks):
        app.post_message(app.take_snapshot())
        await pilot.pause()
