"""The dashboard's own widgets: what they draw, and that a tick repaints only what changed."""

from __future__ import annotations

import itertools
import random

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult

from gputop_train.tui.widgets.chart import BrailleChart, ChartLabel, braille_rows
from gputop_train.tui.widgets.live_text import LiveText

_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


def braille_by_dots(values: list[float | None], top: float, width: int, height: int) -> list[str]:
    """The chart's definition, dot by dot: each point fills its dot column up to its level."""
    if not values or width <= 0 or height <= 0:
        return [" " * max(width, 0)] * max(height, 0)
    cells = [[0] * width for _ in range(height)]
    dots_high = 4 * height
    step = len(values) / (2 * width)  # resampled as the chart does
    for x in range(2 * width):
        value = values[min(len(values) - 1, int(x * step))]
        if value is None or value <= 0 or top <= 0:
            continue
        top_dot = dots_high - 1 - round(min(1.0, value / top) * (dots_high - 1))
        for y in range(top_dot, dots_high):
            cells[y // 4][x // 2] |= _DOTS[x % 2][y % 4]
    return ["".join(chr(0x2800 + c) if c else " " for c in row) for row in cells]


def test_braille_rows_match_the_dot_by_dot_definition() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        values = [
            None if rng.random() < 0.1 else rng.uniform(-5, 130) for _ in range(rng.randint(0, 130))
        ]
        top = rng.choice([100.0, 50.0, 1e-9, 0.0, -1.0])
        width, height = rng.randint(0, 40), rng.randint(0, 10)
        assert braille_rows(values, top, width, height) == braille_by_dots(
            values, top, width, height
        )


def test_a_full_scale_value_fills_its_column_and_zero_leaves_it_blank() -> None:
    rows = braille_rows([100.0, 0.0], 100.0, 2, 2)
    assert rows == ["⣿ ", "⣿ "]


class CountingText(LiveText):
    """Records which lines Textual asked it to draw."""

    drawn: list[int]

    def render_line(self, y: int):
        self.drawn.append(y)
        return super().render_line(y)


class OnePanel(App[None]):
    CSS = "LiveText { width: 30; }"

    def compose(self) -> ComposeResult:
        panel = CountingText(id="panel")
        panel.drawn = []
        yield panel


async def test_live_text_repaints_only_the_lines_that_changed() -> None:
    app = OnePanel()
    async with app.run_test(size=(40, 10)) as pilot:
        panel = app.query_one(CountingText)
        panel.show(Text("samples/s 100\nstep p50 20 ms\ndata-wait 5%"))
        await pilot.pause()
        assert panel.size.height == 3
        panel.drawn.clear()
        panel.show(Text("samples/s 100\nstep p50 21 ms\ndata-wait 5%"))
        await pilot.pause()
        assert panel.drawn == [1]
        lines = [panel.render_line(y).text for y in range(3)]
        assert [line.rstrip() for line in lines] == [
            "samples/s 100",
            "step p50 21 ms",
            "data-wait 5%",
        ]


async def test_live_text_grows_when_its_text_wraps_onto_more_lines() -> None:
    app = OnePanel()
    async with app.run_test(size=(40, 10)) as pilot:
        panel = app.query_one(LiveText)
        panel.show(Text("▶ short\n  evidence"))
        await pilot.pause()
        assert panel.size.height == 2
        panel.show(Text("▶ " + "a longer action " * 3 + "\n  evidence"))
        await pilot.pause()
        assert panel.size.height == 3  # same newlines, one more wrapped row
        assert panel.text.plain.endswith("evidence")


async def test_live_text_cuts_a_no_wrap_line_with_an_ellipsis() -> None:
    app = OnePanel()
    async with app.run_test(size=(40, 10)) as pilot:
        panel = app.query_one(LiveText)
        header = Text("gputop-train │ running │ " + "python train.py " * 4)
        header.no_wrap, header.overflow = True, "ellipsis"
        panel.show(header)
        await pilot.pause()
        assert panel.size.height == 1
        assert panel.render_line(0).text == header.plain[:29] + "…"


def test_a_changed_figure_marks_only_its_cells_dirty() -> None:
    from rich.console import Console
    from textual.geometry import Region

    from gputop_train.tui.widgets.live_text import _changed_regions, _render

    console = Console()

    def regions(y: int, old: Text, new: Text) -> list[Region]:
        rendered = (_render(old, console), _render(new, console))
        return _changed_regions(y, old, new, rendered, 30)

    before, after = Text("step p50 20 ms   p95 31 ms"), Text("step p50 21 ms   p95 31 ms")
    assert regions(4, before, after) == [Region(10, 4, 1, 1)]
    # A longer figure: up to where the two lines stop differing.
    assert regions(0, Text("CPU 9%"), Text("CPU 10%")) == [Region(4, 0, 3, 1)]
    # Two figures far apart are two regions; near ones are one (a skip costs a cursor move).
    far = regions(0, Text("a 1" + " " * 20 + "b 1"), Text("a 2" + " " * 20 + "b 2"))
    assert far == [Region(2, 0, 1, 1), Region(25, 0, 1, 1)]
    near = regions(0, Text("a 1  b 1"), Text("a 2  b 2"))
    assert near == [Region(2, 0, 6, 1)]
    # A style that changes; a character two cells wide: the whole line.
    styled = Text("CPU 9%")
    styled.stylize("red", 4, 6)
    assert regions(0, Text("CPU 9%"), styled) == [Region(4, 0, 2, 1)]
    assert regions(0, Text("GPU 日本"), Text("GPU 日")) == [Region(0, 0, 30, 1)]


def spans_cell_by_cell(
    y: int, before: list[Segment], after: list[Segment], width: int
) -> list[tuple[int, int, int, int]]:
    """The dirty spans' definition: each cell (character, style) compared in turn, the padding
    past a line's end blank; changes at most ``MERGE_GAP_CELLS`` apart in one span."""
    from gputop_train.tui.widgets.dirty import MERGE_GAP_CELLS

    blank = (" ", Style.null())
    old = [(c, s.style or Style.null()) for s in before for c in s.text]
    new = [(c, s.style or Style.null()) for s in after for c in s.text]
    length = min(max(len(old), len(new)), width)
    changed = [
        x
        for x in range(length)
        if (old[x] if x < len(old) else blank) != (new[x] if x < len(new) else blank)
    ]
    spans: list[tuple[int, int, int, int]] = []
    for x in changed:
        if spans and x - (spans[-1][0] + spans[-1][2]) <= MERGE_GAP_CELLS:
            spans[-1] = (spans[-1][0], y, x + 1 - spans[-1][0], 1)
        else:
            spans.append((x, y, 1, 1))
    return spans


def test_dirty_spans_match_the_cell_by_cell_definition() -> None:
    from gputop_train.tui.widgets.dirty import changed_spans, line_of

    rng = random.Random(11)
    styles = [None, Style(), Style(color="red"), Style(bold=True), Style(color="red", bold=True)]

    def line(base: str) -> list[Segment]:
        cuts = sorted(rng.sample(range(len(base) + 1), min(len(base) + 1, rng.randint(1, 5))))
        bounds = [0, *cuts, len(base)]
        return [Segment(base[a:b], rng.choice(styles)) for a, b in itertools.pairwise(bounds)]

    for _ in range(3000):
        text = "".join(rng.choice("ab 1") for _ in range(rng.randint(0, 70)))
        changed = "".join(c if rng.random() < 0.9 else rng.choice("ab 1") for c in text)
        changed = changed[: rng.randint(0, len(changed))] if rng.random() < 0.2 else changed
        before, after, width = line(text), line(changed), rng.randint(0, 80)
        found = changed_spans(3, line_of(before), line_of(after), width)
        assert [(r.x, r.y, r.width, r.height) for r in found] == spans_cell_by_cell(
            3, before, after, width
        )


async def test_a_changed_figure_is_written_only_up_to_where_the_line_changed() -> None:
    app = OnePanel()
    async with app.run_test(size=(40, 10)) as pilot:
        panel = app.query_one(CountingText)
        panel.show(Text("samples/s 100      steps 40"))
        await pilot.pause()
        dirty: list = []
        original = panel.refresh
        panel.refresh = lambda *regions, **kw: dirty.extend(regions) or original(*regions, **kw)  # type: ignore[method-assign, func-returns-value]
        panel.show(Text("samples/s 101      steps 40"))
        await pilot.pause()
        assert [(r.x, r.width) for r in dirty] == [(12, 1)]


def test_process_columns_keep_their_widest_width() -> None:
    from gputop_train.tables import Column, fit

    columns = [Column[str]("PID", str, keep=0, right=False), Column[str]("CPU", str, keep=1)]
    wide = fit(columns, [("1", "100%")], 80)
    narrow = fit(columns, [("1", "7%")], 80, floor=(3, 4))
    assert [len(line) for line in narrow] == [len(line) for line in wide]
    assert narrow[1] == "1     7%"


class OneChart(App[None]):
    def compose(self) -> ComposeResult:
        yield BrailleChart("GPU %", id="chart")


async def test_a_chart_takes_a_new_theme_without_new_data() -> None:
    app = OneChart()
    async with app.run_test(size=(40, 6)) as pilot:
        chart = app.query_one(BrailleChart)
        chart.update_series([50.0] * 40, 100.0, ChartLabel("50", "100", "1 min"))
        await pilot.pause()
        before = next(iter(chart.render_line(0))).style
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        after = next(iter(chart.render_line(0))).style
        assert before is not None and after is not None
        assert after.bgcolor != before.bgcolor  # the title's background follows the theme
        assert after.bgcolor == chart.rich_style.bgcolor
