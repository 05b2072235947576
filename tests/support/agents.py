"""The hook's agent in the test's own process (CPU torch), for tests of its knobs and guard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gputop_train import wire
from gputop_train.hook import patches
from gputop_train.hook.agent import Agent


def hooked_agent() -> Iterator[Agent]:
    """The hook installed in this process with a fresh agent that opens no socket."""
    import torch

    fresh = Agent(torch)
    fresh.active = True  # no listener: outcomes are read from the board's history
    patches._state["agent"] = fresh
    patches.install(torch)
    yield fresh
    patches.uninstall()
    patches._state["agent"] = None


def request(agent: Agent, name: str, value: Any) -> None:
    """A set_knob frame, as the monitor sends it."""
    agent.board.request(
        wire.SetKnob.decode({"type": "set_knob", "id": name, "name": name, "value": value})
    )
