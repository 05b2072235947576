"""The job view's table (jobview/rows_table.py): a 1,000-node job's 8,000 ranks go in at
once, the screen shows the header and the rows under the scroll, the cursor moves by the
keyboard and the view follows it, a refresh keeps the cursor's place."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult

from gputop_train.jobview.rows_table import RowsTable

COLUMNS = ("rank", "node", "step")


def rows(n: int, step: str = "60.0 ms") -> list[tuple[str, ...]]:
    return [(str(r), str(r // 8), step) for r in range(n)]


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield RowsTable(COLUMNS, id="t")

    def on_mount(self) -> None:
        self.query_one(RowsTable).focus()


def screen_lines(table: RowsTable) -> list[str]:
    return [table.render_line(y).text.rstrip() for y in range(table.size.height)]


async def test_the_header_stays_and_the_rows_under_the_scroll_are_drawn() -> None:
    app = OneTable()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowsTable)
        table.set_rows(rows(8000))
        await pilot.pause()
        lines = screen_lines(table)
        assert lines[0].split() == ["rank", "node", "step"]
        assert lines[1].split() == ["0", "0", "60.0", "ms"]
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 7999
        lines = screen_lines(table)
        assert lines[0].split()[0] == "rank" and lines[-1].split()[0] == "7999"


async def test_the_keyboard_moves_the_cursor_and_the_view_follows() -> None:
    app = OneTable()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowsTable)
        table.set_rows(rows(100))
        await pilot.press(*["down"] * 30)
        await pilot.pause()
        assert table.cursor_row == 30 and table.scroll_y > 0
        shown = [line.split()[0] for line in screen_lines(table)[1:] if line]
        assert "30" in shown
        await pilot.press("pageup", "home")
        assert table.cursor_row == 0 and table.scroll_y == 0


async def test_a_refresh_keeps_the_cursor_and_a_shorter_one_clamps_it() -> None:
    app = OneTable()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowsTable)
        table.set_rows(rows(50))
        await pilot.press(*["down"] * 20)
        table.set_rows(rows(50, step="61.0 ms"))
        await pilot.pause()
        assert table.cursor_row == 20 and table.get_row_at(20)[2] == "61.0 ms"
        table.set_rows(rows(5))
        assert table.cursor_row == 4


async def test_8000_rows_refresh_in_a_small_part_of_the_interval() -> None:
    """A DataTable took 2-2.5 s a refresh of 8,000 ranks on the dev box; the job view's
    interval is 2 s."""
    app = OneTable()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(RowsTable)
        started = time.process_time()
        for k in range(3):
            table.set_rows(rows(8000, step=f"{60 + k}.0 ms"))
            await pilot.pause()
        assert (time.process_time() - started) / 3 < 0.5
