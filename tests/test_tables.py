"""The phase and process tables, one declaration each (gputop_train/tables.py): the TUI, the
headless printer and the Markdown summary show the same cells."""

from __future__ import annotations

from dataclasses import replace

from gputop_train import tables
from gputop_train.headless import phase_table as headless_table
from gputop_train.record.summary import markdown, summarize
from gputop_train.tables import PHASE_COLUMNS, PROCESS_COLUMNS, Column, PhaseLine
from gputop_train.tui.panels.text import phase_table as tui_table
from gputop_train.views import phase_dicts, view_of
from tests.support.sessions import scripted_session


def test_every_front_end_writes_a_phase_row_with_the_same_cells() -> None:
    session = scripted_session()
    view = view_of(session.snapshot(with_phases=True))
    (phase, *_) = PhaseLine.of_view(view)
    cells = tables.cells(PHASE_COLUMNS, [phase])[0]
    assert cells[3].endswith(" s")  # the warm-up: its seconds, as the TUI always showed it
    tui = tui_table(view).plain.splitlines()[2]
    headless = headless_table(view)[2]
    md = next(
        line
        for line in markdown(summarize(session, {"host": "box"})).splitlines()
        if line.startswith("| 1 |")
    )
    for text in (tui, headless, md):
        for cell in cells:
            assert cell in text, (cell, text)


def test_the_summary_reads_a_phase_back_from_its_json_as_the_view_shows_it() -> None:
    view = view_of(scripted_session().snapshot(with_phases=True))
    from_view = tables.cells(PHASE_COLUMNS, PhaseLine.of_view(view))
    from_json = tables.cells(PHASE_COLUMNS, [PhaseLine.of_dict(p) for p in phase_dicts(view)])
    assert from_json == from_view


def test_a_reverted_change_says_why_and_is_cut_only_where_the_width_is_fixed() -> None:
    (phase, *_) = PhaseLine.of_view(view_of(scripted_session().snapshot(with_phases=True)))
    reverted = replace(phase, change="compile=default", failed="the loss went NaN")
    (cells,) = tables.cells(PHASE_COLUMNS, [reverted])
    assert cells[1] == "compile=default ✗ reverted: the loss went NaN"  # whole: the Markdown's
    _, row = tables.fit(PHASE_COLUMNS, [cells], 200)
    cut = PHASE_COLUMNS[1].cut
    assert cut is not None and f" {cells[1][: cut - 1]}… " in row  # the TUI's, headless


def test_a_column_with_no_figure_in_any_row_is_left_out_only_where_it_is_optional() -> None:
    columns = [
        Column[str]("kept", lambda _: "N/A", keep=0),
        Column[str]("optional", lambda _: "N/A", keep=1, optional=True),
    ]
    assert tables.fit(columns, tables.cells(columns, ["row"]), 80) == ["kept", " N/A"]


def test_a_growing_column_takes_its_room_at_once_and_never_narrows() -> None:
    first = tables.widened(PROCESS_COLUMNS, (), (3, 6, 14, 4, 7, 6, 7, 8, 3, 8, 3))
    assert first == (3, 6, 14, 4, 7, 6, 7, 8, 3, 8, 3)  # the first draw: as wide as its cells
    read = [c.header for c in PROCESS_COLUMNS].index("read/s")
    wider = list(first)
    wider[read] += 1
    grown = tables.widened(PROCESS_COLUMNS, first, wider)
    assert grown[read] == PROCESS_COLUMNS[read].room  # "999.9 MB/s": no more growth to come
    assert tables.widened(PROCESS_COLUMNS, grown, first) == grown  # narrower cells: kept
