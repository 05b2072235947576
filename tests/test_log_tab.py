"""The Log tab never holds the UI on a chatty job (issue 39: it froze ~15 s; issue 46: at 200
lines of 150 characters a step it showed ~55 s after ``3``): it is Textual's ``Log``, which
keeps lines as text and draws only the rows on screen, bounded to SCROLLBACK_LINES; a hidden
tab reads nothing."""

from __future__ import annotations

from pathlib import Path

from gputop_train.job.log import LogTail
from gputop_train.tui.panels.log import SCROLLBACK_LINES, LogPanel
from gputop_train.tui.screens import QuitScreen
from tests.support.sessions import scripted_session
from tests.support.tui import app_under_test

PAD = "x" * 120  # lines of ~150 characters, as the job printed


def _chatter(log: Path, start: int, count: int) -> None:
    with log.open("a") as handle:
        handle.writelines(f"step {n} loss 0.1234 {PAD}\n" for n in range(start, start + count))


async def test_a_chatty_job_keeps_a_bounded_tail_and_nothing_while_the_tab_is_hidden(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    _chatter(log, 0, 400)
    session = scripted_session()
    app = app_under_test(session.snapshot, log=LogTail(log))
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(LogPanel)
        for chunk in range(1, 4):  # the job prints on while the Overview is up
            _chatter(log, chunk * 400, 400)
            app.refresh_data()
            await pilot.pause()
        assert not panel.lines  # hidden: nothing read, nothing kept
        await pilot.press("3")
        await pilot.pause()
        assert str(log) in panel.lines[0]  # where every line is
        assert panel.lines[1].startswith("step 0 ")
        assert panel.lines[-1].startswith("step 1599 ")  # the newest line, followed
        assert panel.is_vertical_scroll_end
        for chunk in range(4, 8):  # on screen, refreshes of chatter: the scrollback is bounded
            _chatter(log, chunk * 2_000, 2_000)
            app.refresh_data()
            await pilot.pause()
        assert len(panel.lines) == SCROLLBACK_LINES
        assert panel.lines[-1].startswith("step 15999 ")
        assert panel.lines[0].startswith(f"step {16_000 - SCROLLBACK_LINES} ")
        await pilot.press("q")  # the UI still answers at once
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)


async def test_a_refresh_of_more_lines_than_the_scrollback_keeps_the_newest(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    log.write_text("")
    session = scripted_session()
    app = app_under_test(session.snapshot, log=LogTail(log))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        _chatter(log, 0, 3 * SCROLLBACK_LINES)
        app.refresh_data()
        await pilot.pause()
        panel = app.query_one(LogPanel)
        assert len(panel.lines) == SCROLLBACK_LINES
        assert panel.lines[-1].startswith(f"step {3 * SCROLLBACK_LINES - 1} ")


async def test_a_jobs_escape_sequences_are_dropped_never_sent_to_the_terminal(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "\x1b[31mred\x1b[0m loss\n"  # a coloured logger
        "\x1b[1A\x1b[2Kbatch 50%\n"  # tqdm's cursor-up and erase
        "\x1b]0;title\x07after\tcolumn\n"  # a window title; a tab is kept
    )
    app = app_under_test(scripted_session().snapshot, log=LogTail(log))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert list(app.query_one(LogPanel).lines)[1:] == [
            "red loss",
            "batch 50%",
            "after\tcolumn",
        ]
