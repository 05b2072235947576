"""The numerics guard: a change whose next steps' loss goes NaN/Inf or diverges from the steps
before it is reverted and reported; one that leaves the loss alone stays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gputop_train.hook.agent import Agent  # noqa: E402
from gputop_train.hook.knobs import Knob  # noqa: E402
from gputop_train.hook.loss_guard import WINDOW_STEPS  # noqa: E402
from tests.support.agents import hooked_agent, request  # noqa: E402


@pytest.fixture
def agent() -> Iterator[Agent]:
    yield from hooked_agent()


def run(agent: Agent, steps: int, changes: dict[int, tuple[str, Any]], clip: bool = False) -> dict:
    """A small regression whose loss is multiplied by the ``scale`` knob the script declares."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    config = {"scale": 1.0}
    agent.board.declare(Knob("scale", 1, lambda v: config.update(scale=float(v)), minimum=1))
    agent.board.declare(Knob("poison", False, lambda v: config.update(poison=v)))
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    for step in range(1, steps + 1):
        loss = (model(x) - y).pow(2).mean() * config["scale"]
        if config.get("poison"):
            loss = loss * float("nan")
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        optimizer.step()
        optimizer.zero_grad()
        if step in changes:
            request(agent, *changes[step])
    return config


def outcome(agent: Agent) -> list[tuple[Any, ...]]:
    return [(o.name, o.value, o.ok, o.reverted, o.error) for o in agent.board.history]


def test_a_change_that_makes_the_loss_diverge_is_reverted_with_its_figures(agent: Agent) -> None:
    config = run(agent, 20 + 2 * WINDOW_STEPS, {15: ("scale", 100)})
    assert config["scale"] == 1.0  # put back
    applied, reverted = outcome(agent)
    assert applied == ("scale", 100, True, False, None)
    assert reverted[:4] == ("scale", 1, False, True)
    assert reverted[4].startswith("numerics guard: the loss diverged: ")
    assert "steps after the change" in reverted[4] and "(limit " in reverted[4]


def test_a_change_that_makes_the_loss_nan_is_reverted(agent: Agent) -> None:
    config = run(agent, 20 + 2 * WINDOW_STEPS, {15: ("poison", True)}, clip=True)
    assert config["poison"] is False
    assert outcome(agent)[-1][3:] == (
        True, f"numerics guard: the loss became NaN/Inf within {WINDOW_STEPS} steps",
    )  # fmt: skip


def test_a_change_that_leaves_the_loss_alone_stays(agent: Agent) -> None:
    run(agent, 20 + 3 * WINDOW_STEPS, {15: ("cudnn_benchmark", True)})
    assert outcome(agent) == [("cudnn_benchmark", True, True, False, None)]
    (notice,) = [n for n in agent._outbox.notices if n.startswith("numerics guard")]
    assert notice.startswith("numerics guard: cudnn_benchmark kept (loss ")
    assert torch.backends.cudnn.benchmark is True
    torch.backends.cudnn.benchmark = False


def test_without_a_whole_window_before_the_change_only_nan_is_judged(agent: Agent) -> None:
    # A change at the second boundary has two steps of reference: too few for a spread.
    run(agent, 3 * WINDOW_STEPS, {1: ("scale", 100)})
    assert [o[:4] for o in outcome(agent)] == [("scale", 100, True, False)]
