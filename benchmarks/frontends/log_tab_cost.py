"""What one refresh of the Log tab costs the UI thread on a chatty job (issue 39).

A job prints about 1 MiB between two refreshes (15,000 lines of 70 characters). The Log tab
as it is (``tui/panels/log.py``: at most LINES_PER_TICK lines a refresh, the newest) against
the tab as it was (every new line written to the widget at every refresh), each in a Textual
app of its own at 120x40, refreshes taken in ABBA order. Prints the median seconds a refresh
held the UI thread per arm and their ratio.

    python -m benchmarks.frontends.log_tab_cost --refreshes 6
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import RichLog

from gputop_train.job.log import LogTail
from gputop_train.session.model import Session
from gputop_train.tui.panels.base import UiState
from gputop_train.tui.panels.log import LogPanel
from gputop_train.views import view_of

LINES_PER_REFRESH = 15_000  # ~1 MiB of 70-character lines


class OldLog(RichLog):
    """The tab as it was: each new line written at each refresh."""

    def __init__(self, log: LogTail) -> None:
        super().__init__(max_lines=2000, wrap=False, markup=False)
        self._log = log

    def refresh_log(self) -> None:
        follow = self.is_vertical_scroll_end
        for line in self._log.read_new():
            self.write(line, scroll_end=follow)


class OneLog(App[None]):
    def __init__(self, widget: RichLog) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def chatter(path: Path, start: int) -> None:
    with path.open("a") as handle:
        handle.write(
            "".join(
                f"step {n} loss 0.{n % 997:03d} lr 3e-4 grad_norm 1.234 tokens/s 123456\n"
                for n in range(start, start + LINES_PER_REFRESH)
            )
        )


async def refresh_times(arm: str, refreshes: int, folder: Path) -> list[float]:
    """Seconds each refresh held the UI thread, for one arm."""
    path = folder / f"{arm}.log"
    path.write_text("")
    tail = LogTail(path)
    widget: RichLog = LogPanel(tail) if arm == "now" else OldLog(tail)
    view = view_of(Session(command=("job",)).snapshot())
    ui = UiState(job_pid=None, paused=False, chart_window="1 min", replay_status=None)
    times = []
    async with OneLog(widget).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for index in range(refreshes):
            chatter(path, index * LINES_PER_REFRESH)
            started = time.perf_counter()
            if isinstance(widget, LogPanel):
                widget.show_view(view, ui)
            else:
                assert isinstance(widget, OldLog)
                widget.refresh_log()
            times.append(time.perf_counter() - started)
            await pilot.pause()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=6, help="refreshes per arm and round")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"now": [], "before": []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.rounds):
            order = ["now", "before"] if index % 2 == 0 else ["before", "now"]
            for arm in order:
                results[arm] += asyncio.run(refresh_times(arm, args.refreshes, Path(folder)))
    now, before = (statistics.median(results[arm]) for arm in ("now", "before"))
    for arm, values in results.items():
        spread = f"{min(values):.3f}-{max(values):.3f} s"
        print(f"{arm:<7} median {statistics.median(values):.3f} s  range {spread}")
    print(f"before / now: {before / now:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
