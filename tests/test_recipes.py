"""The recipes of docs/architecture.md, each exercised end to end: a sampler, a fact, a rule and
a panel, each registered in one place; every frame's one route into the session; every recipe
citing tests that exist; and the two defects the structure hid."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from rich.text import Text

from gputop_train import events, wire
from gputop_train.advise import rules
from gputop_train.advise.rules import registry
from gputop_train.collect.base import CHEAP, Sink
from gputop_train.collect.fake import FakeGpu, FakeNvml, FakeProcess, FakePsutil
from gputop_train.hook import agent
from gputop_train.monitor import hook_client
from gputop_train.monitor.hook_client import HookClient, _Connection
from gputop_train.monitor.monitor import Monitor, default_samplers
from gputop_train.record.reader import read, replay_all
from gputop_train.record.recorder import Recorder
from gputop_train.session import model
from gputop_train.session import observe as observing
from gputop_train.session.model import Session
from gputop_train.session.stats import Observation
from gputop_train.tui import layout
from gputop_train.tui.boundary import AppOptions
from gputop_train.tui.panels.base import Panel, UiState
from gputop_train.tui.panels.log import LogPanel
from gputop_train.tui.widgets.live_text import LiveText
from gputop_train.views import View, status_fields, view_of
from tests.support.paths import REPO
from tests.support.sessions import JOB_PID, scripted_session
from tests.support.tui import app_under_test


def test_every_recipe_names_the_tests_that_hold_it_and_they_exist() -> None:
    """Each "Add ..." recipe of docs/architecture.md cites at least one test of its own, as
    ``tests/test_x.py::test_name``, and each cited test is there: a recipe and its test
    cannot drift apart unseen."""
    recipes = (REPO / "docs" / "architecture.md").read_text().split("\n## Recipes\n", 1)[1]
    for section in recipes.split("\n### ")[1:]:
        title = section.splitlines()[0]
        cited = re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", section)
        assert cited, f"the recipe {title!r} cites no test"
        for path, name in cited:
            source = (REPO / path).read_text()
            assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path}::{name}"


# -- Add a sampler: a class of the Sampler shape, one line in the list the Monitor runs ------


class DiskSampler:
    """A toy: the free bytes of a disk, once every 50 ms."""

    name = "disk"
    period_s = 0.05
    cost = CHEAP

    def __init__(self) -> None:
        self.taken = 0

    def open(self, sink: Sink) -> None:
        pass

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        self.taken += 1
        sink.apply(events.ReadingTaken("disk", {"free_bytes": 1000 - self.taken}))

    def close(self) -> None:
        pass


def test_a_new_sampler_is_one_class_and_one_line(tmp_path: Path) -> None:
    session = Session(command=("train.py",))
    recorder = Recorder(tmp_path / "run.jsonl", {"command": ["train.py"]})
    session.listener = recorder.record_event
    table = FakePsutil([FakeProcess(JOB_PID, 1)])
    samplers = [*default_samplers(session, JOB_PID, FakeNvml([FakeGpu()]), table), DiskSampler()]
    monitor = Monitor(session, JOB_PID, samplers=samplers)
    monitor.start()
    deadline = time.monotonic() + 5.0
    while "disk" not in session.snapshot().readings and time.monotonic() < deadline:
        time.sleep(0.02)
    monitor.stop()
    recorder.close()
    live = session.snapshot().readings["disk"]
    assert live["free_bytes"] < 1000
    replayed = replay_all(read(tmp_path / "run.jsonl")).snapshot().readings["disk"]
    assert replayed == live  # recorded, and replayed as it was


# -- Add a fact: one frame class, one event class, one handler ------------------------------


def test_a_new_fact_is_one_frame_one_event_and_one_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The registries are copied first so that the toy's classes leave them as they were.
    monkeypatch.setattr(wire, "FRAMES", dict(wire.FRAMES))
    monkeypatch.setattr(events, "EVENTS", dict(events.EVENTS))
    monkeypatch.setattr(events, "FROM_FRAME", dict(events.FROM_FRAME))

    @wire.frame("tokens")  # 1. the frame (and its row in docs/protocol.md)
    @dataclass(frozen=True)
    class Tokens(wire.Frame):
        step: int
        tokens: int | None = None

    @events.event("tokens", frame=Tokens)  # 2. the event the frame becomes
    @dataclass(frozen=True)
    class TokensCounted(events.Event):
        pid: int
        step: int
        tokens: int | None = None

    def on_tokens(session: Session, item: TokensCounted) -> None:  # 3. the session's handler
        with session._lock:
            session._readings["tokens"] = {"step": item.step, "tokens": item.tokens}

    monkeypatch.setitem(model._HANDLERS, TokensCounted, on_tokens)

    session = Session(command=("train.py",))
    recorder = Recorder(tmp_path / "run.jsonl", {"command": ["train.py"]})
    session.listener = recorder.record_event
    client = HookClient(session, set, directory=tmp_path)
    ours, theirs = socket.socketpair()
    connection = _Connection(JOB_PID, ours)
    sent = Tokens(step=12, tokens=4096).encode() + Tokens(step="13").encode()  # type: ignore[arg-type]
    for raw in connection.decoder.feed(sent):
        client._dispatch(connection, raw)
    for sock in (ours, theirs):
        sock.close()
    client.close()
    recorder.close()
    live = session.snapshot()
    assert live.readings["tokens"] == {"step": 12, "tokens": 4096}
    assert live.dropped_frames == 1  # the frame whose step was a string
    replayed = replay_all(read(tmp_path / "run.jsonl")).snapshot()
    assert replayed.readings["tokens"] == live.readings["tokens"]
    assert replayed.dropped_frames == 1


def test_a_new_fact_the_advisor_reads_is_one_frame_and_its_line_in_fact_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same one route (``events.FROM_FRAME``): a fact frame becomes ``FactSeen``, and the
    session keeps it typed, by its class, for ``observe.fact_at`` to read by attribute."""
    monkeypatch.setattr(wire, "FRAMES", dict(wire.FRAMES))
    monkeypatch.setattr(events, "FROM_FRAME", dict(events.FROM_FRAME))

    @wire.frame("batch_tokens")  # 1. the frame (and its row in docs/protocol.md)
    @dataclass(frozen=True)
    class BatchTokens(wire.Frame):
        tokens: int | None = None

    # 2. its line in events.FACT_FRAMES (which @event("fact", frame=FACT_FRAMES) registers)
    monkeypatch.setattr(events, "FACT_FRAMES", (*events.FACT_FRAMES, BatchTokens))
    monkeypatch.setitem(events.FROM_FRAME, BatchTokens, events.FactSeen)

    clock = [100.0]
    session = Session(command=("train.py",), clock=lambda: clock[0])
    recorder = Recorder(tmp_path / "run.jsonl", {"command": ["train.py"]})
    session.listener = recorder.record_event
    session.apply(events.ProcessHello.of(JOB_PID, {"rank": None}))
    client = HookClient(session, set, directory=tmp_path)
    ours, theirs = socket.socketpair()
    connection = _Connection(JOB_PID, ours)
    sent = BatchTokens(tokens=4096).encode() + BatchTokens(tokens="many").encode()  # type: ignore[arg-type]
    for raw in connection.decoder.feed(sent):
        client._dispatch(connection, raw)
    for sock in (ours, theirs):
        sock.close()
    client.close()
    recorder.close()
    seen = observing.fact_at(session._series(), BatchTokens, clock[0])
    assert seen == BatchTokens(tokens=4096) and seen.tokens == 4096  # typed, by attribute
    assert session.facts(BatchTokens) == [BatchTokens(tokens=4096)]
    assert session.snapshot().dropped_frames == 1  # the frame whose tokens were a string
    replayed = replay_all(read(tmp_path / "run.jsonl"))
    assert replayed.facts(BatchTokens) == session.facts(BatchTokens)


def test_every_frame_the_monitor_reads_has_one_route_into_the_session() -> None:
    """A frame the hook sends is either one event, by its event's ``frame=`` (FROM_FRAME), or
    taken by a handler of the hook client's own (it makes several events or changes the
    connection): never both, and none left to be counted as dropped."""
    # What the monitor sends: the hook's commands, and ``alive`` (any line is a sign of life).
    to_hook = {*agent._COMMANDS, wire.Alive}
    from_hook = set(wire.FRAMES.values()) - to_hook
    handled, one_event = set(hook_client._HANDLERS), set(events.FROM_FRAME)
    assert not handled & one_event
    assert handled | one_event == from_hook


# -- Add a rule: a function of an Observation in its family's module, one entry in RULES ----


def slow_steps(o: Observation) -> rules.Finding | None:
    if o.steps.step_ms_p50 is None or o.steps.step_ms_p50 < 100.0:
        return None
    return rules.Finding("toy.slow_steps", "Slow steps", ("p50 over 100 ms",), "look", None, 1, 9)


def test_a_new_rule_is_one_function_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "RULES", (*registry.RULES, slow_steps))
    view = view_of(scripted_session().snapshot())
    assert view.headline is not None and view.headline.id == "toy.slow_steps"
    assert status_fields(view)["findings"][0]["id"] == "toy.slow_steps"  # headless JSON too


# -- Add a panel: a Panel widget in tui/panels/, one line in its tab in tui/layout.py ---------


class DiskPanel(LiveText, Panel):
    def show_view(self, view: View, ui: UiState) -> None:
        free = view.snap.readings.get("disk", {}).get("free_bytes")
        self.show(Text(f"disk free {free if free is not None else 'N/A'} B"))


async def test_a_new_panel_is_one_class_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    overview = layout.TABS[0]

    def with_disk(options: AppOptions):
        yield from overview.widgets(options)
        yield DiskPanel(id="disk")

    monkeypatch.setattr(layout, "TABS", [replace(overview, widgets=with_disk), *layout.TABS[1:]])
    session = scripted_session()
    session.apply(events.ReadingTaken("disk", {"free_bytes": 42}))
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(100, 40)):
        assert app.query_one("#disk", LiveText).text.plain == "disk free 42 B"


# -- The defects: notices past the 200 kept, dropped frames in the record ---------------------


async def test_the_newest_notice_reaches_the_log_after_five_hundred() -> None:
    session = scripted_session()
    app = app_under_test(session.snapshot)
    async with app.run_test(size=(80, 24)) as pilot:
        for n in range(500):
            session.apply(events.NoticeAdded(f"sampler error {n}"))
            if n % 50 == 0:
                app.refresh_data()
        app.refresh_data()
        await pilot.press("3")
        lines = list(app.query_one(LogPanel).lines)
    shown = [line for line in lines if "sampler error" in line]
    assert shown[-1].endswith("sampler error 499")  # the newest, once counted past 200
    assert len(shown) == len(set(shown)) == 200  # the session keeps the last 200; none twice


def test_dropped_frames_are_recorded_and_replayed(tmp_path: Path) -> None:
    session = Session(command=("train.py",))
    recorder = Recorder(tmp_path / "run.jsonl", {"command": ["train.py"]})
    session.listener = recorder.record_event
    session.apply(events.FramesDropped(3))
    recorder.close()
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "run.jsonl").open()]
    assert "dropped" in kinds
    assert replay_all(read(tmp_path / "run.jsonl")).snapshot().dropped_frames == 3
