"""The Log tab never holds the UI on a chatty job (issue 39: it froze ~15 s, and once took
~60 s to leave): a refresh renders at most LINES_PER_TICK lines, the newest, and only while
the tab is on screen; what is passed over is counted in one line naming the file."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import RichLog

from gputop_train.job.log import LogTail
from gputop_train.tui.panels.log import LINES_PER_TICK
from gputop_train.tui.screens import QuitScreen
from tests.support.sessions import scripted_session
from tests.support.tui import app_under_test


def _chatter(log: Path, start: int, count: int) -> None:
    with log.open("a") as handle:
        handle.write(
            "".join(f"step {n} loss 0.{n % 997:03d}\n" for n in range(start, start + count))
        )


async def test_a_chatty_job_renders_a_bounded_tail_and_nothing_while_the_tab_is_hidden(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    _chatter(log, 0, 20_000)
    session = scripted_session()
    app = app_under_test(session.snapshot, log=LogTail(log))
    async with app.run_test(size=(80, 24)) as pilot:
        richlog = app.query_one(RichLog)
        for chunk in range(1, 4):  # the job prints on while the Overview is up
            _chatter(log, chunk * 20_000, 20_000)
            app.refresh_data()
            await pilot.pause()
        assert not richlog.lines  # hidden: nothing rendered, nothing queued to render
        await pilot.press("3")
        await pilot.pause()
        shown = [strip.text for strip in richlog.lines]
        assert 0 < len(shown) <= LINES_PER_TICK + 1
        assert "lines not shown here: see" in shown[0] and str(log) in shown[0]
        assert shown[-1].startswith("step 79999 ")  # the newest line
        _chatter(log, 80_000, 20_000)  # on screen, a refresh's worth of chatter
        app.refresh_data()
        await pilot.pause()
        shown = [strip.text for strip in richlog.lines]
        assert len(shown) <= 2 * (LINES_PER_TICK + 1)
        assert shown[-1].startswith("step 99999 ")
        await pilot.press("q")  # the UI still answers at once
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
