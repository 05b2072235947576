"""The hook's one wrapper around ``torch.autograd.backward`` (hook/patches.py): the loss for
the numerics guard, the step breakdown's backward marks and DDP's all-reduce wait, each done
by the one layer every backward of the job passes through (issue 46: three nested wrappers
cost a fast CPU loop ~1%), the DDP part only once a DDP model exists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gputop_train.hook import patches
from gputop_train.hook.agent import Agent
from gputop_train.hook.step_parts import BWD_END, BWD_START
from tests.support.agents import hooked_agent


@pytest.fixture
def original_backward() -> torch.Tensor:
    patches.uninstall()
    return torch.autograd.backward  # type: ignore[return-value]


@pytest.fixture
def agent(original_backward: object) -> Iterator[Agent]:
    for hooked in hooked_agent():
        # No workload probe due: a FLOP count started at a test's last step would stay on
        # (its dispatch mode) into the next test of this process.
        hooked._schedule.count_step = hooked._schedule.profile_step = -1
        yield hooked


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, backwards: int) -> None:
    for _ in range(backwards):
        model(torch.randn(4, 3)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()


def test_one_wrapper_wraps_torch_backward_and_uninstall_restores_it(
    original_backward: object, agent: Agent
) -> None:
    wrapper = torch.autograd.backward
    assert wrapper is not original_backward
    assert wrapper.__wrapped__ is original_backward  # type: ignore[attr-defined]
    patches.uninstall()
    assert torch.autograd.backward is original_backward
    patches.install(torch)


def test_the_guard_keeps_each_steps_last_loss_detached_and_the_marks_bound_each_backward(
    agent: Agent,
) -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    _train_step(model, optimizer, 1)  # the model is found at the first step's end
    timeline = agent._model.timeline
    for _ in range(3):
        model(torch.randn(4, 3)).square().mean().backward()
    kinds = [kind for kind, _, _ in timeline._marks]
    assert kinds.count(BWD_START) == kinds.count(BWD_END) == 3
    loss = model(torch.randn(4, 3)).square().mean()
    loss.backward()
    optimizer.step()
    kept = agent.guard._recent["loss"][-1]
    assert not kept.requires_grad and kept.item() == loss.item()
    assert agent.guard._loss is None  # nothing held past the step's end


def test_without_ddp_the_wrapper_never_asks_the_collective_clock(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = agent.collectives
    assert clock is not None and not clock.ddp_models
    asked: list[bool] = []
    monkeypatch.setattr(clock, "backward_returned", lambda: asked.append(True))
    model = torch.nn.Linear(3, 2)
    _train_step(model, torch.optim.SGD(model.parameters(), lr=0.0), 2)
    assert asked == []
    assert clock.take_step() == (None, [])


def test_a_ddp_model_under_gloo_gets_its_all_reduce_wait_from_the_same_wrapper(
    agent: Agent, tmp_path: Path
) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1)  # fmt: skip
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 2))
        clock = agent.collectives
        assert clock is not None and clock.ddp_models
        clock.take_step()  # DDP's start-up broadcasts
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        model(torch.randn(4, 3)).square().mean().backward()
        host_ms, pairs = clock.take_step()
        assert host_ms is not None and host_ms >= 0.0 and pairs == []
        assert clock.waiting_in() == (None, None)  # backward returned: no longer in the wait
        optimizer.step()
    finally:
        dist.destroy_process_group()
