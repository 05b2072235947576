"""What the TUI writes to the terminal: only the changed cells, styles as changes, a table that
keeps its extent, and chart areas that scroll every 2 s (issue: cost, ≤ 4 KiB/s at 160x48)."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.ansi import AnsiDecoder
from rich.color import Color, ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._compositor import ChopsUpdate
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from gputop_train.session.model import Snapshot
from gputop_train.tui import partial_updates
from gputop_train.tui.partial_updates import TEXTUAL_RENDER_PARTIAL_UPDATE, render_strip
from gputop_train.tui.renderer_guard import install_partial_updates, renderer_status
from gputop_train.tui.widgets.chart import BrailleChart
from gputop_train.tui.widgets.live_text import LiveText
from tests.support.sessions import scripted_session
from tests.support.tui import app_under_test, tick

RED = Style(color="red", bgcolor="grey11")


def written(strip: Strip, span: tuple[int, int], width: int = 40) -> str:
    """What a partial update of ``span`` (x1, x2) of a one-line screen writes."""
    assert install_partial_updates().installed
    update = ChopsUpdate([{0: strip}], [(0, *span)], [[width]])
    return partial_updates.render_segments(update, Console(color_system="256"))


def test_a_partial_update_is_written_from_its_first_dirty_cell() -> None:
    strip = Strip([Segment("abcdefghijklmnopqrstuvwxyz0123456789ABCD", RED)])
    out = written(strip, (10, 14))
    assert out.startswith("\x1b[1;11H")  # row 1, column 11: the region's start
    assert "klmn" in out and "j" not in out and "o" not in out


def test_a_line_with_a_wide_character_is_written_from_the_widgets_edge() -> None:
    # Cutting into a two-cell character would shift the rest of the line.
    strip = Strip([Segment("GPU 日本 " + "x" * 32, RED)])
    out = written(strip, (10, 14))
    assert out.startswith("\x1b[1;1H") and "GPU 日本" in out


_styles = st.builds(
    Style,
    color=st.sampled_from([None, "red", "blue", "color(197)", "#102030"]),
    bgcolor=st.sampled_from([None, "black", "color(233)"]),
    bold=st.sampled_from([None, True]),
    dim=st.sampled_from([None, True]),
    underline=st.sampled_from([None, True]),
)
_segments = st.lists(
    st.tuples(st.text("ab ⣿⡇", min_size=1, max_size=4), st.one_of(st.none(), _styles)),
    min_size=1,
    max_size=12,
)


@settings(deadline=None)  # correctness only: a loaded machine may take 200 ms over an example
@given(_segments, st.sampled_from([ColorSystem.EIGHT_BIT, ColorSystem.TRUECOLOR]))
def test_styles_written_as_changes_show_what_textual_would_write(
    segments: list[tuple[str, Style | None]], system: ColorSystem
) -> None:
    strip = Strip([Segment(text, style) for text, style in segments])
    ours = render_strip(strip, system)
    theirs = strip.render(type("Console", (), {"_color_system": system})())
    assert cells(ours) == cells(theirs)
    assert cells(ours + "x")[-1] == ("x", Style())  # the terminal is left in the default style
    assert len(ours) <= len(theirs)


def cells(written: str) -> list[tuple[str, Style]]:
    """What a terminal shows for ``written``: each cell's character and style (a colour set
    to the terminal's default shows as no colour)."""
    (line,) = list(AnsiDecoder().decode(written))
    console, shown = Console(), []
    for offset, char in enumerate(line.plain):
        style = line.get_style_at_offset(console, offset)
        default = Color.default()
        color = None if style.color == default else style.color
        bgcolor = None if style.bgcolor == default else style.bgcolor
        shown.append((char, Style(color=color, bgcolor=bgcolor) + style.without_color))
    return shown


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LiveText(sticky=True)


async def test_a_sticky_table_keeps_its_rows_when_processes_go() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(LiveText)
        table.show(Text("PID CPU\n1 90%\n2 80%\n3 70%"))
        await pilot.pause()
        assert table.size.height == 4
        dirty: list = []
        original = table.refresh
        table.refresh = lambda *r, **kw: dirty.append((r, kw)) or original(*r, **kw)  # type: ignore[method-assign, func-returns-value]
        table.show(Text("PID CPU\n1 91%"))  # two workers left
        await pilot.pause()
        assert table.size.height == 4  # no re-layout: nothing below moves or is repainted
        assert all(not kw.get("layout") for _, kw in dirty)
        assert table.render_line(2).text.strip() == ""
        table.reset_extent()
        await pilot.pause()
        assert table.size.height == 2


async def test_chart_areas_scroll_every_two_seconds_and_their_titles_every_tick() -> None:
    session = scripted_session()
    clock = {"t": 0.0, "latest": 1000.0}

    def source(
        window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot:
        snap = session.snapshot(window_s, chart_window_s, chart_points, with_phases)
        snap = replace(snap, t=snap.started_at + 100.0 + clock["t"])
        if snap.charts is None:
            return snap
        values = (*(float(v) for v in range(500, 1090, 10)), clock["latest"])
        return replace(snap, charts=replace(snap.charts, samples_per_s=values))

    app = app_under_test(source)
    async with app.run_test(size=(160, 48)) as pilot:
        chart = app.query_one("#chart-throughput", BrailleChart)

        def area() -> list[str]:
            return [chart.render_line(y).text for y in range(1, chart.size.height)]

        async def one_second(latest: float) -> None:
            clock["t"] += 1.0
            clock["latest"] = latest
            await tick(app, pilot, 2)  # the fast tick, the once-a-second one (the charts)

        await pilot.pause()
        first = area()
        await one_second(3000.0)
        assert chart.render_line(0).text.startswith("samples/s 3,000 ")  # the title follows
        assert area() == first  # the area waits for its 2 s
        await one_second(3000.0)
        assert area() != first  # and then scrolls


async def test_rendering_only_the_touched_widgets_writes_what_textual_would() -> None:
    session, draw = scripted_session(), random.Random(16)

    def source(
        window_s: float, chart_window_s: float, chart_points: int, with_phases: bool
    ) -> Snapshot:
        snap = session.snapshot(window_s, chart_window_s, chart_points, with_phases)
        snap = replace(snap, t=snap.started_at + 100.0 + draw.randrange(100))
        if snap.charts is None:
            return snap
        values = tuple(float(draw.randrange(500, 3000)) for _ in range(60))
        return replace(snap, charts=replace(snap.charts, samples_per_s=values))

    app = app_under_test(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        compositor, console = app.screen._compositor, Console(color_system="truecolor")
        assert type(compositor).render_partial_update is not TEXTUAL_RENDER_PARTIAL_UPDATE
        assert renderer_status().installed  # the app installed ours
        # Ours itself, and its writer itself: not the guarded ones, whose fallback to
        # Textual's own would make them equal whatever ours did.
        ours, write = partial_updates.render_partial_update, partial_updates.render_segments
        widgets = list(compositor.visible_widgets)
        for round_index in range(200):
            if round_index % 10 == 0:  # new figures: the panels mark their changed lines
                await tick(app, pilot, 2)
            for widget in draw.sample(widgets, 3):
                widget.refresh()  # its cached lines go stale
            regions = {  # on the screen, as Textual's are
                Region(x, y, draw.randint(1, 160 - x), draw.randint(1, min(4, 48 - y)))
                for x, y in ((draw.randrange(160), draw.randrange(48)) for _ in range(6))
            }
            # Either meets the stale lines first and renders them; the other finds them cached.
            order = [ours, TEXTUAL_RENDER_PARTIAL_UPDATE][:: 1 if round_index % 2 else -1]
            written = {}
            for render in order:
                compositor._dirty_regions = set(regions)
                update = render(compositor)
                assert update is not None
                written[render] = write(update, console)
            assert written[ours] == written[TEXTUAL_RENDER_PARTIAL_UPDATE]
        await pilot.pause()
