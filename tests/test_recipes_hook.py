"""The hook's half of the recipes of docs/architecture.md: a fact the training thread finds
goes out through the agent's outbox (hook/outbox.py), once to the monitors there are and in a
later monitor's hello; a command from the monitor is a frame class and its line in the
agent's ``_COMMANDS``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from gputop_train import wire
from gputop_train.hook import agent as agent_module
from gputop_train.hook.agent import Agent


def _frames(sent: list[bytes]) -> list[wire.Frame | None]:
    return [wire.decode_frame(raw) for raw in wire.FrameDecoder().feed(b"".join(sent))]


def test_a_new_fact_from_the_training_thread_is_sent_once_and_kept_for_a_later_hello(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire, "FRAMES", dict(wire.FRAMES))

    @wire.frame("batch_tokens")  # 1. the frame (its event and handler: test_recipes.py)
    @dataclass(frozen=True)
    class BatchTokens(wire.Frame):
        tokens: int | None = None

    agent = Agent(torch)
    agent._publish(BatchTokens(tokens=4096))  # the training thread: an append, no encode
    assert _frames(agent.take_frames()) == [BatchTokens(tokens=4096)]  # the listener's send
    assert agent.take_frames() == []  # once
    assert agent.hello().latest == [BatchTokens(tokens=4096).fields()]  # a later monitor's


def test_a_new_command_is_a_frame_class_and_its_line_in_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire, "FRAMES", dict(wire.FRAMES))

    @wire.frame("pause_probes")  # 1. the frame (and its row in docs/protocol.md)
    @dataclass(frozen=True)
    class PauseProbes(wire.Frame):
        seconds: int

    heard: list[tuple[wire.Frame, int | None]] = []
    # 2. its line in _COMMANDS: frame class -> the agent's handler (the listener's thread)
    monkeypatch.setitem(
        agent_module._COMMANDS,
        PauseProbes,
        lambda agent, frame, client: heard.append((frame, client)),
    )
    agent = Agent(torch)
    agent.on_frame({"type": "pause_probes", "seconds": 5}, client=2)
    assert heard == [(PauseProbes(seconds=5), 2)]
    with pytest.raises(ValueError, match="malformed pause_probes"):
        agent.on_frame({"type": "pause_probes", "seconds": "5"}, client=2)
    assert agent._outbox.notices[-1].startswith("hook refused a pause_probes command")
    assert heard == [(PauseProbes(seconds=5), 2)]
