"""A table of text rows that draws only the rows in view (Textual's Line API), for the job
view's nodes and ranks: a DataTable measures every cell of every row it is given, 2-2.5 s
a refresh of a 1,000-node job's 8,000 ranks on the dev box (docs/jobs.md "Scale"); this
one's refresh is the rows' widths (a ``len`` a cell) and a screen of lines. Keyboard only:
arrows, PgUp/PgDn, Home/End move the cursor row, and the view follows it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

GAP = 2  # spaces between columns


class RowsTable(ScrollView, can_focus=True):
    """A header line that stays, and rows of plain text under it, one cursor row."""

    COMPONENT_CLASSES = {"rows-table--header", "rows-table--cursor"}
    DEFAULT_CSS = """
    RowsTable > .rows-table--header { text-style: bold; background: $panel; }
    RowsTable > .rows-table--cursor { background: $accent 40%; }
    RowsTable:focus > .rows-table--cursor { background: $accent; }
    """
    BINDINGS = [
        Binding("up", "cursor(-1)", "up", show=False),
        Binding("down", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "cursor(-1000000000)", "first", show=False),
        Binding("end", "cursor(1000000000)", "last", show=False),
    ]

    cursor_row: reactive[int] = reactive(0)

    def __init__(self, columns: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = tuple(columns)
        self._rows: list[tuple[str, ...]] = []
        self._widths = [len(c) for c in self.columns]

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def get_row_at(self, index: int) -> tuple[str, ...]:
        return self._rows[index]

    def set_rows(self, rows: list[tuple[str, ...]]) -> None:
        """Replace the rows, keeping the cursor's place and the scroll (a refresh must not
        jump the view)."""
        self._rows = rows
        self._widths = [
            max([len(title)] + [len(row[i]) for row in rows if i < len(row)])
            for i, title in enumerate(self.columns)
        ]
        width = sum(self._widths) + GAP * (len(self._widths) - 1)
        self.virtual_size = Size(width, len(rows) + 1)  # the header and the rows
        self.cursor_row = min(self.cursor_row, max(0, len(rows) - 1))
        self.refresh()

    def _line(self, cells: Sequence[str]) -> str:
        return (" " * GAP).join(
            cell.ljust(width) for cell, width in zip(cells, self._widths, strict=False)
        )

    def render_line(self, y: int) -> Strip:
        """Screen line ``y``: the header at 0, else the row under it at the scroll."""
        width = self.size.width
        scroll_x = int(self.scroll_x)
        if y == 0:
            text, style = self._line(self.columns), self._style("rows-table--header")
        else:
            index = int(self.scroll_y) + y - 1
            if index >= len(self._rows):
                return Strip.blank(width, self.rich_style)
            text = self._line(self._rows[index])
            style = (
                self._style("rows-table--cursor") if index == self.cursor_row else self.rich_style
            )
        strip = Strip([Segment(text, style)], len(text))
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    def _style(self, name: str) -> Style:
        return self.rich_style + self.get_component_rich_style(name)

    def watch_cursor_row(self, old: int, new: int) -> None:
        rows_in_view = max(1, self.size.height - 1)
        if new < self.scroll_y:
            self.scroll_to(y=new, animate=False)
        elif new >= self.scroll_y + rows_in_view:
            self.scroll_to(y=new - rows_in_view + 1, animate=False)
        self.refresh()

    def action_cursor(self, by: int) -> None:
        self.cursor_row = max(0, min(len(self._rows) - 1, self.cursor_row + by))

    def action_page(self, by: int) -> None:
        self.action_cursor(by * max(1, self.size.height - 1))
