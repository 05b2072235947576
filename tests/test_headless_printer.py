"""Headless is a printer of views (issue 47 point 4): a snapshot source and a clock in, lines
out; no signal, no process, no real time. The job's driving is cli/drive.py's, tested where
it starts processes (test_signal_handlers.py, test_cli_headless.py, test_startup_interrupt.py)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import pytest

from gputop_train.headless import Printer, ReaderGone
from gputop_train.session.model import Snapshot
from tests.support.clock import ManualClock
from tests.support.sessions import scripted_session

INTERVAL_S = 2.0


@dataclass
class FakeClock:
    """The driver's clock: ``ticks`` waits, each moving the time by what it was asked, then
    the watch is over."""

    ticks: int
    time: ManualClock = field(default_factory=ManualClock)
    waited: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.time()

    def wait(self, seconds: float) -> bool:
        self.waited.append(seconds)
        self.time.advance(seconds)
        return len(self.waited) > self.ticks


@dataclass
class FakeSource:
    """The session's snapshots, and what each was asked for."""

    asked: list[tuple[float, bool]] = field(default_factory=list)

    def __call__(
        self, window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot:
        self.asked.append((window_s, with_phases))
        return scripted_session().snapshot(window_s, chart_window_s, chart_points, with_phases)


def _printer(ticks: int, as_json: bool) -> tuple[Printer, FakeSource, FakeClock, io.StringIO]:
    source, clock, out = FakeSource(), FakeClock(ticks), io.StringIO()
    return Printer(source, clock, 10.0, as_json, out), source, clock, out


def test_a_status_each_interval_until_the_clock_says_the_watch_is_over() -> None:
    printer, source, clock, out = _printer(3, as_json=True)
    printer.statuses(INTERVAL_S)
    assert clock.waited == [INTERVAL_S] * 4  # the fourth wait is the end of the watch
    assert source.asked == [(10.0, False)] * 3  # the window asked, no phase table per line
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["type"] == "status" for line in lines)


def test_json_lines_are_one_object_each_with_the_documented_fields() -> None:
    printer, _, _, out = _printer(1, as_json=True)
    printer.statuses(INTERVAL_S)
    printer.summary(started_at=ManualClock().now - 60.0)
    status, summary = (json.loads(line) for line in out.getvalue().splitlines())
    for key in ("t", "elapsed_s", "job_running", "samples_per_s", "data_wait_pct", "findings"):
        assert key in status and key in summary
    assert status["window_s"] == 10.0 and "exit_code" not in status
    assert summary["type"] == "summary" and "exit_code" in summary
    assert summary["phases"] and {"phase", "speedup", "headline"} <= set(summary["phases"][0])


def test_the_summary_covers_the_whole_run_with_its_phase_table() -> None:
    printer, source, clock, out = _printer(0, as_json=False)
    printer.statuses(INTERVAL_S)
    assert out.getvalue() == ""  # the watch was over at the first tick: no status
    printer.summary(started_at=clock.now() - 300.0)
    assert source.asked == [(301.0, True)]  # from the start, a second past now
    text = out.getvalue()
    assert text.startswith("gputop-train: python demos/resnet.py")
    assert "phases (" in text and text.rstrip().splitlines()[-1].startswith("  job exit code")


@pytest.mark.parametrize(("error", "pipe"), [(BrokenPipeError(), True), (OSError(5, "EIO"), False)])
def test_a_reader_gone_is_raised_to_the_driver_saying_whether_it_was_a_pipe(
    error: OSError, pipe: bool
) -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise error

    printer = Printer(FakeSource(), FakeClock(5), 10.0, False, Gone())
    with pytest.raises(ReaderGone) as gone:
        printer.statuses(INTERVAL_S)
    assert gone.value.pipe is pipe
