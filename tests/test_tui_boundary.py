"""The TUI's boundary (issue 28 point 5): built by one factory from protocols, a live job's
controls and a replay's timeline exclusive, the job's answer to a knob coming back as a
message."""

from __future__ import annotations

import pytest
from textual.message import Message

from gputop_train.tui.app import create_app
from gputop_train.tui.boundary import AppOptions
from gputop_train.tui.messages import KnobAnswered
from tests.support.sessions import scripted_session
from tests.support.tui import AskedControls, app_under_test


def test_a_live_jobs_controls_and_a_replays_timeline_are_exclusive() -> None:
    session = scripted_session()
    with pytest.raises(ValueError, match="exclusive"):
        create_app(session.snapshot, AppOptions(), controls=AskedControls(), timeline=object())  # type: ignore[arg-type]


async def test_a_refused_knob_comes_back_as_a_message_and_is_shown_as_an_error() -> None:
    controls = AskedControls(knob_error="pin_memory: pinned memory needs CUDA")
    app = app_under_test(scripted_session().snapshot, controls=controls)
    seen: list[Message] = []
    async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
        await pilot.press("4", "down", "enter")  # pin_memory: a switch, asked at once
        await pilot.pause()
    assert controls.asked == [("pin_memory", False)]
    answers = [m for m in seen if isinstance(m, KnobAnswered)]
    assert [(a.knob.name, a.knob.value, a.value, a.error) for a in answers] == [
        ("pin_memory", True, False, "pin_memory: pinned memory needs CUDA")
    ]  # the knob's state as it was shown, the value asked, the job's answer
    shown = [(n.message, n.severity) for n in app._notifications]
    assert ("pin_memory: pinned memory needs CUDA", "error") in shown


async def test_each_control_key_reaches_the_jobs_controls() -> None:
    controls = AskedControls()
    app = app_under_test(scripted_session().snapshot, controls=controls)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("y", "a", "D")
        await pilot.pause()
    assert [name for name, _ in controls.asked] == ["scan_syncs", "autopilot", "dump_stall"]
