"""The GPU panel on a node of 8 GPUs (issue 37): a row per job GPU, 8 fit at 80x24, the room
at 200x60 used; a throttled GPU and a shared one stand out; the other GPUs apart."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from gputop_train.session.model import Snapshot
from gputop_train.tui.panels import text as panels
from gputop_train.tui.widgets.live_text import LiveText
from tests.support.gpu_node import Node, node_session
from tests.support.tui import AskedControls, app_under_test, tick

gpu_panel = panels.gpu_panel  # the panel's own, before a test counts its calls

EIGHT_RANKS = Node(
    gpus=8,
    ranks={1000 + i: i for i in range(8)},
    throttled=5,
    others={3: [(900, "alice", 9.0, 45)]},
)


def _app(node: Node):
    session, _ = node_session(node)
    return app_under_test(session.snapshot, controls=AskedControls())


def test_eight_gpus_8_ranks_80x24(snap_compare) -> None:
    assert snap_compare(_app(EIGHT_RANKS), terminal_size=(80, 24))


def test_eight_gpus_8_ranks_200x60(snap_compare) -> None:
    assert snap_compare(_app(EIGHT_RANKS), terminal_size=(200, 60))


def test_one_gpu_of_eight_80x24(snap_compare) -> None:
    node = Node(gpus=8, ranks={4242: 1}, others={4: [(901, "bob", 20.0, 80)]})
    assert snap_compare(_app(node), terminal_size=(80, 24))


def test_every_job_gpu_has_a_row_within_a_compact_panel() -> None:
    snap = node_session(EIGHT_RANKS)[0].snapshot()
    lines = panels.gpu_panel(snap, 38).plain.splitlines()
    rows = [line for line in lines if line[:3].strip().isdigit()]
    assert [int(line.split()[0]) for line in rows] == list(range(8))
    assert all(len(line) <= 38 for line in lines)
    assert rows[5].endswith("thr") and "PID 900 alice" in lines[lines.index(rows[3]) + 1]


def test_the_assumed_gpus_are_said_before_the_job_touches_one() -> None:
    node = Node(gpus=8, visible="1", touched=False, nvml_sees_job=False)
    shown = panels.gpu_panel(node_session(node)[0].snapshot(), 38).plain
    assert "assumed from CUDA_VISIBLE_DEVICES=1" in shown and "GPU 0,2-7: idle" in shown


async def test_the_panel_is_built_again_only_when_its_figures_change(monkeypatch) -> None:
    """The GPU panel's key (tui/panels/base.py): a tick whose GPU figures are those drawn
    last builds no text; a changed figure does."""
    first = node_session(EIGHT_RANKS)[0].snapshot()
    hotter = replace(first, gpus=(replace(first.gpus[0], temp_c=99.0), *first.gpus[1:]))
    shown = iter([first, first, first, hotter, hotter])
    built: list[float | None] = []

    def counted(snap: Snapshot, width: int = 0) -> Text:
        built.append(snap.gpus[0].temp_c)
        return gpu_panel(snap, width)

    monkeypatch.setattr(panels, "gpu_panel", counted)
    app = app_under_test(lambda *_: next(shown), controls=AskedControls())
    async with app.run_test(size=(200, 60)) as pilot:  # the mount draws the first
        await tick(app, pilot, 4)
        assert built == [first.gpus[0].temp_c, 99.0]
        assert "99°C" in app.query_one("#gpus", LiveText).text.plain
