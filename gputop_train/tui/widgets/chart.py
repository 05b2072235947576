"""A braille area chart with a fixed y-range, drawn through the Line API from cached strips.

Textual's Sparkline autoscales to min..max, which is wrong for a 0-100% axis, and a Rich
renderable per refresh costs far more than handing back cached strips; this chart re-renders
only when its series change, repaints only the cells that changed (a new title value is a
few cells; the rows above the area stay blank), and leaves buckets with no data blank.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from .dirty import changed_spans, line_of

# Braille dots: each cell is 2 columns x 4 rows of dots; bits per (column, row from top).
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
# _CELLS[a][b]: the cell whose left column has its bottom a dots filled, its right column b.
_LEFT = tuple(sum(_DOTS[0][3 - i] for i in range(filled)) for filled in range(5))
_RIGHT = tuple(sum(_DOTS[1][3 - i] for i in range(filled)) for filled in range(5))
_CELLS = tuple(
    tuple(chr(0x2800 + left + right) if left or right else " " for right in _RIGHT)
    for left in _LEFT
)


def braille_rows(values: Sequence[float | None], top: float, width: int, height: int) -> list[str]:
    """Render ``values`` (resampled to 2*width points) as ``height`` rows of braille, the area
    under the line filled (it reads at a glance). Built a cell column at a time, from a cache:
    this runs for every chart at every redraw."""
    points = 2 * width
    if not values or width <= 0 or height <= 0:
        return [" " * max(width, 0)] * max(height, 0)
    step = len(values) / points
    last, top_dot = len(values) - 1, 4 * height - 1
    filled = []  # dots filled from the bottom, per point
    for x in range(points):
        value = values[min(last, int(x * step))]
        if value is None or value <= 0 or top <= 0:
            filled.append(0)
        else:
            filled.append(round(min(value / top, 1.0) * top_dot) + 1)
    pairs = zip(filled[0::2], filled[1::2], strict=True)
    columns = [_column(left, right, height) for left, right in pairs]
    return ["".join(row) for row in zip(*columns, strict=True)][::-1]


@functools.lru_cache(maxsize=4096)
def _column(left: int, right: int, height: int) -> str:
    """One column of cells, bottom to top, for ``left``/``right`` dots filled from the bottom."""
    return "".join(
        _CELLS[min(4, max(0, left - 4 * row))][min(4, max(0, right - 4 * row))]
        for row in range(height)
    )


def _runs(row: str, under: str | None, main: Style, part: Style) -> list[Segment]:
    """Segments of one row, one per run of equal style (few escapes on the wire)."""
    if under is None:
        return [Segment(row, main)]
    segments: list[Segment] = []
    start, current = 0, None
    for x, char in enumerate(row):
        # A cell takes the part's colour only where the part fills all of its dots; a blank
        # cell joins the run it is in (its colour does not show: fewer codes on the wire).
        if char == " " and current is not None:
            continue
        style = part if char != " " and under[x] == char else main
        if style is not current and x > start:
            segments.append(Segment(row[start:x], current))
            start = x
        current = style
    segments.append(Segment(row[start:], current))
    return segments


class ChartLabel(NamedTuple):
    """A chart title's figures: the latest value and the top of the axis, then what a narrow
    chart drops first to last: the data's source, the window (the header shows it too), the
    colour legend."""

    value: str
    axis: str
    window: str
    legend: str = ""
    source: str = ""

    def variants(self) -> list[str]:
        """From the whole title to the shortest; each drops one more part, never cuts one."""
        head = f"{self.value} · axis {self.axis}"
        kept = [
            (self.window, self.legend, self.source),
            (self.window, self.legend, ""),
            ("", self.legend, ""),
            ("", "", ""),
        ]
        return [" · ".join([head, *filter(None, parts)]) for parts in kept]


class _Pens(NamedTuple):
    """The chart's styles: its background, the title's, the value's, the area's and its part's."""

    base: Style
    title: Style
    label: Style
    main: Style
    part: Style


class BrailleChart(Widget):
    """A titled area chart; ``update_series`` sets data and range, redrawing only on change."""

    DEFAULT_CSS = """
    BrailleChart { height: 5; }
    """

    def __init__(
        self, title: str, color: str = "green", under_color: str = "red", *, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.title = title
        self._main = Style(color=color)
        self._part = Style(color=under_color)
        self._data: tuple = ((), 100.0, ChartLabel("", "", ""), ())
        self._strips: list[Strip] = []
        self._strips_size: tuple[int, int] | None = None
        self._pens: _Pens | None = None  # computing the widget's style walks the DOM: once

    def update_series(
        self,
        values: Sequence[float | None],
        top: float,
        label: ChartLabel,
        under: Sequence[float | None] = (),
        scroll: bool = True,
    ) -> None:
        """``under`` (optional) is a part of ``values`` drawn in its own colour, stacked below.
        ``scroll`` False changes the title only: the area keeps the series it has."""
        if scroll or not self._data[0]:
            data = (tuple(values), top, label, tuple(under))
        else:
            data = (self._data[0], self._data[1], label, self._data[3])
        if data == self._data:
            return
        title_only = data[:2] == self._data[:2] and data[3] == self._data[3]
        self._data = data
        size = self._strips_size
        if size is None or min(size) <= 0:
            self._strips_size = None
            self.refresh()
            return
        before = self._strips
        if title_only:  # most ticks: the area waits for its bucket, only the value moves
            self._strips = [self._title(size[0]), *before[1:]]
        else:
            self._strips = self._build(*size)
        changed = [
            region
            for y, strip in enumerate(self._strips)
            if y >= len(before) or strip != before[y]
            for region in (
                changed_spans(y, line_of(before[y]), line_of(strip), size[0])
                if y < len(before)
                else [Region(0, y, size[0], 1)]
            )
        ]
        if changed:
            self.refresh(*changed)

    def notify_style_update(self) -> None:
        """A theme or colour change: the strips are built again in the new style."""
        super().notify_style_update()
        self._pens = None
        self._strips_size = None

    def _styled(self) -> _Pens:
        if self._pens is None:
            base = self.rich_style  # the widget's own background, so the chart blends in
            self._pens = _Pens(
                base,
                base + Style(bold=True),
                base + Style(dim=True),
                base + self._main,
                base + self._part,
            )
        return self._pens

    @property
    def label(self) -> ChartLabel:
        return self._data[2]

    def _title(self, width: int) -> Strip:
        """The title and the most of its label that fits (80 columns give a chart ~38)."""
        pens = self._styled()
        room = width - len(self.title) - 1
        variants = self.label.variants()
        label = next((v for v in variants if len(v) <= room), variants[-1])
        title = [Segment(f"{self.title} ", pens.title), Segment(label, pens.label)]
        return Strip(title).crop(0, width).extend_cell_length(width, pens.base)

    def _build(self, width: int, height: int) -> list[Strip]:
        values, top, _, under = self._data
        pens = self._styled()
        strips = [self._title(width)]
        rows = braille_rows(values, top, width, height - 1)
        under_rows = braille_rows(under, top, width, height - 1) if under else None
        for y, row in enumerate(rows):
            part_row = under_rows[y] if under_rows else None
            strips.append(Strip(_runs(row, part_row, pens.main, pens.part), width))
        return strips

    def render_line(self, y: int) -> Strip:
        size = (self.size.width, self.size.height)
        if self._strips_size != size:
            self._strips = self._build(*size) if min(size) > 0 else []
            self._strips_size = size
        return self._strips[y] if y < len(self._strips) else Strip.blank(self.size.width)
