"""A braille line chart with a fixed y-range: cheap to draw, honest about gaps.

Textual's Sparkline autoscales to min..max, which is wrong for a 0-100% axis; this chart
takes its range from the caller and leaves buckets with no data blank.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

# Braille dots: each cell is 2 columns x 4 rows of dots; bits per (column, row from top).
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


def braille_rows(values: Sequence[float | None], top: float, width: int, height: int) -> list[str]:
    """Render ``values`` (resampled to 2*width points) as ``height`` rows of braille."""
    points = 2 * width
    if not values or width <= 0 or height <= 0:
        return [" " * max(width, 0)] * max(height, 0)
    step = len(values) / points
    cells = [[0] * width for _ in range(height)]
    dots_high = 4 * height
    for x in range(points):
        value = values[min(len(values) - 1, int(x * step))]
        if value is None or value <= 0 or top <= 0:
            continue
        level = max(0.0, min(1.0, value / top))
        dot_y = dots_high - 1 - round(level * (dots_high - 1))
        for y in range(dot_y, dots_high):  # filled area below the line reads at a glance
            cells[y // 4][x // 2] |= _DOTS[x % 2][y % 4]
    return ["".join(chr(0x2800 + c) if c else " " for c in row) for row in cells]


class BrailleChart(Widget):
    """A titled area chart; ``update_series`` sets data and range, then it redraws."""

    DEFAULT_CSS = """
    BrailleChart { height: 5; }
    """

    def __init__(
        self, title: str, style: str = "green", under_style: str = "red", *, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.title = title
        self.style = style
        self.under_style = under_style
        self.values: Sequence[float | None] = ()
        self.under: Sequence[float | None] = ()
        self.top = 100.0
        self.label = ""

    def update_series(
        self,
        values: Sequence[float | None],
        top: float,
        label: str,
        under: Sequence[float | None] = (),
    ) -> None:
        """``under`` (optional) is a part of ``values`` drawn in its own colour, stacked below."""
        self.values, self.top, self.label, self.under = values, top, label, under
        self.refresh()

    def render(self) -> Text:
        width, height = max(1, self.size.width), max(1, self.size.height - 1)
        rows = braille_rows(self.values, self.top, width, height)
        under = braille_rows(self.under, self.top, width, height) if self.under else None
        text = Text(no_wrap=True, overflow="crop")
        text.append(f"{self.title} ", style="bold")
        text.append(self.label, style="dim")
        for y, row in enumerate(rows):
            text.append("\n")
            if under is None:
                text.append(row, style=self.style)
                continue
            for x, char in enumerate(row):
                # A cell takes the "under" colour only where the part fills all of its dots.
                style = self.under_style if char != " " and under[y][x] == char else self.style
                text.append(char, style=style)
        return text
