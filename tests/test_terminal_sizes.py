"""80x24 complete, 160x48 used (issue 29): the header and the chart titles are shortened by
rule (parts dropped whole, least needed first), never cut; a wide terminal shows them whole."""

from __future__ import annotations

from gputop_train.tui.panels.overview import ChartsPanel, HeaderPanel
from gputop_train.tui.widgets.chart import BrailleChart
from tests.support.sessions import scripted_session
from tests.support.tui import app_under_test, tick


async def _titles(size: tuple[int, int]) -> tuple[str, list[tuple[str, list[str]]]]:
    app = app_under_test(scripted_session().snapshot)
    async with app.run_test(size=size) as pilot:
        await tick(app, pilot, 2)
        header = app.query_one(HeaderPanel).text.plain
        charts = [
            (
                chart.render_line(0).text.rstrip(),
                [f"{chart.title} {v}" for v in chart.label.variants()],
            )
            for chart in app.query_one(ChartsPanel).query(BrailleChart)
        ]
    return header, charts


async def test_at_80x24_nothing_is_cut_and_parts_are_dropped_whole() -> None:
    header, charts = await _titles((80, 24))
    assert len(header) <= 80 and "…" not in header
    assert header.endswith("│ resnet.py") and "H100 80GB HBM3" in header  # the rule's shortening
    for title, variants in charts:
        assert title in variants, title  # one of the label's whole variants, never a cut one
    step_title = next(t for t, _ in charts if t.startswith("step ms"))
    assert step_title.endswith("red=data-wait")  # the colours keep their legend at 80 columns


async def test_at_160x48_the_titles_are_whole() -> None:
    header, charts = await _titles((160, 48))
    assert "NVIDIA H100 80GB HBM3" in header and "python demos/resnet.py --workers 8" in header
    for title, variants in charts:
        assert title == variants[0]  # value, axis, window, legend and source
