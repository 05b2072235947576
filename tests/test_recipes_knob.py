"""The recipe "Add a built-in knob" of docs/architecture.md, end to end on a CPU model: a
method of ``BuiltinKnobs`` that returns a ``Knob`` and its line in ``build``; the hook then
declares it after the first step, applies a change at a step boundary, puts back a change
whose apply raised, and the autopilot turns it for a finding that names its role."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")

from gputop_train.advise.rules import Change, Finding
from gputop_train.autopilot.plan import candidates
from gputop_train.hook.agent import Agent
from gputop_train.hook.builtin_knobs import BuiltinKnobs
from gputop_train.hook.knobs import Knob
from gputop_train.session.phases import knob_state
from tests.support.agents import hooked_agent, request


def test_a_new_builtin_knob_is_one_method_and_its_line_in_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hooked = hooked_agent()
    try:
        _declared_applied_and_turned(next(hooked), monkeypatch)
    finally:
        next(hooked, None)  # the hook uninstalled


def _declared_applied_and_turned(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    determinism = {"on": False, "refuse": False}

    # 1. The method: the value in force read now, ``apply`` for the training thread.
    def _deterministic(self: BuiltinKnobs) -> Knob:
        def apply(value: bool) -> None:
            if determinism["refuse"]:
                raise RuntimeError("not on this build")
            determinism["on"] = value

        return Knob(
            "deterministic",
            determinism["on"],
            apply,
            help="torch.use_deterministic_algorithms",
            role="deterministic",
            builtin=True,
            numerics="unchanged",
        )

    # 2. Its line in ``build``'s list.
    build = BuiltinKnobs.build
    monkeypatch.setattr(
        BuiltinKnobs, "build", lambda self, *a: [*build(self, *a), _deterministic(self)]
    )

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(16, 4)), 4)

    def train(change: tuple[str, Any] | None = None) -> None:
        for step, (x,) in enumerate(loader, 1):
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            if step == 1 and change:
                request(agent, *change)

    train(("deterministic", True))  # declared after the first step, applied after the next
    spec = next(k for k in agent.board.describe() if k["name"] == "deterministic")
    assert spec["builtin"] and spec["role"] == "deterministic" and spec["kind"] == "bool"
    assert determinism["on"] is True
    determinism["refuse"] = True
    train(("deterministic", False))  # an apply that raises: the value in force stays
    last = agent.board.history[-1]
    assert (last.name, last.ok, last.value) == ("deterministic", False, True)
    assert determinism["on"] is True

    knobs = [k for k in map(knob_state, agent.board.describe()) if k]
    found = Finding("toy.nondeterministic", "t", (), "determinism", None, 0.5, 1.0,
                    changes=(Change("deterministic", False),))  # fmt: skip
    assert [c.settings for c in candidates([found], knobs, None)] == [(("deterministic", False),)]
