"""The terminal writer survives a Textual release (issue 28, point 2): it is installed only where
every internal it needs is there, and a frame it fails is drawn by Textual's own path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rich.console import Console
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region

from gputop_train.tui import partial_updates, renderer_guard
from gputop_train.tui.app import GputopApp
from tests.support.sessions import scripted_session
from tests.support.tui import app_under_test, tick

REGIONS = {Region(0, 0, 160, 3), Region(100, 20, 40, 2), Region(5, 40, 30, 1)}


@pytest.fixture(autouse=True)
def fresh_guard() -> Iterator[None]:
    """Each test starts from the installed renderer with no counts or notices, and leaves it
    so (the replacement is process-wide)."""
    renderer_guard.reset_for_tests()
    renderer_guard.install_partial_updates()
    yield
    renderer_guard.reset_for_tests()
    renderer_guard.install_partial_updates()


def raise_error(*args: object) -> None:
    raise RuntimeError("a Textual we have not seen")


def app() -> GputopApp:
    session = scripted_session()
    return app_under_test(session.snapshot)


def notices(app: GputopApp) -> list[str]:
    return [n.message for n in app._notifications if "terminal writer" in n.message]


def test_every_internal_is_there_on_the_tested_textual() -> None:
    assert renderer_guard.missing_internals() == []
    status = renderer_guard.install_partial_updates()
    assert status.installed and status.reason is None
    assert Compositor.render_partial_update is not partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE
    assert ChopsUpdate.render_segments is not partial_updates.TEXTUAL_RENDER_SEGMENTS
    assert renderer_guard.take_notice() is None  # nothing to say


async def test_a_missing_internal_keeps_textuals_renderer_and_says_so_once() -> None:
    with pytest.MonkeyPatch.context() as textual_without_it:
        textual_without_it.delattr(Compositor, "_regions_to_spans")
        first, second = app(), app()  # each installs at start: the second finds the same
    # (Back for Textual's own renderer, which uses it too.)
    assert Compositor.render_partial_update is partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE
    assert ChopsUpdate.render_segments is partial_updates.TEXTUAL_RENDER_SEGMENTS
    status = renderer_guard.renderer_status()
    assert not status.installed
    assert status.reason is not None and "Compositor._regions_to_spans" in status.reason
    async with first.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        (notice,) = notices(first)
        assert "Textual's own" in notice and "_regions_to_spans" in notice
        assert first.screen._compositor.render_strips()  # the screen is drawn all the same
    async with second.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert notices(second) == []  # said once


def test_an_internal_of_another_shape_keeps_textuals_renderer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def render_segments(self: ChopsUpdate, console: Console, crop: Region) -> str:
        return ""

    monkeypatch.setattr(ChopsUpdate, "render_segments", render_segments)
    status = renderer_guard.install_partial_updates()
    assert not status.installed
    assert status.reason is not None and "ChopsUpdate.render_segments: takes" in status.reason


def test_a_rich_without_the_style_bits_keeps_textuals_renderer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the writer's test line catches when the names are there but do not work.
    monkeypatch.setattr(partial_updates, "_state", raise_error)
    status = renderer_guard.install_partial_updates()
    assert not status.installed
    assert status.reason is not None and "the writer failed on a test line" in status.reason


async def test_a_frame_the_renderer_fails_is_drawn_by_textuals_and_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tui = app()
    async with tui.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        compositor, console = tui.screen._compositor, Console(color_system="truecolor")
        compositor._dirty_regions = set(REGIONS)
        expected = partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE(compositor)
        monkeypatch.setattr(partial_updates, "render_partial_update", raise_error)
        for frame in (1, 2):
            compositor._dirty_regions = set(REGIONS)
            update = Compositor.render_partial_update(compositor)  # the installed one
            assert update is not None
            assert update.render_segments(console) == expected.render_segments(console)
            assert renderer_guard.renderer_status().frame_errors == frame
        await tick(tui, pilot)  # the app says it at its next frame
        (notice,) = notices(tui)
        assert "render: RuntimeError('a Textual we have not seen')" in notice
        await tick(tui, pilot)
        assert len(notices(tui)) == 1  # once, however many frames fail


async def test_a_frame_the_writer_fails_is_written_by_textuals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tui = app()
    async with tui.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        compositor, console = tui.screen._compositor, Console(color_system="truecolor")
        compositor._dirty_regions = set(REGIONS)
        update = Compositor.render_partial_update(compositor)
        assert update is not None
        monkeypatch.setattr(partial_updates, "render_segments", raise_error)
        written = update.render_segments(console)  # the installed writer
        assert written == partial_updates.TEXTUAL_RENDER_SEGMENTS(update, console)
        assert written  # Textual's wrote the frame
        status = renderer_guard.renderer_status()
        assert status.frame_errors == 1 and status.first_error is not None
        assert status.first_error.startswith("write: ")


async def test_the_app_keeps_drawing_while_every_frame_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tui = app()  # installs ours: then every frame of it fails
    monkeypatch.setattr(partial_updates, "render_partial_update", raise_error)
    monkeypatch.setattr(partial_updates, "render_segments", raise_error)
    async with tui.run_test(size=(160, 48)) as pilot:
        await tick(tui, pilot, 3)
        assert renderer_guard.renderer_status().frame_errors > 0
        assert len(notices(tui)) == 1
        assert any("GPU" in strip.text for strip in tui.screen._compositor.render_strips())
