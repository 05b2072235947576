"""Built-in knobs on small CPU models: each applied at a step boundary, measured by what it
changed, put back, and refused with its reason where it does not apply."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")

from gputop_train.hook.agent import Agent
from tests.support.agents import hooked_agent, request


@pytest.fixture
def agent() -> Iterator[Agent]:
    yield from hooked_agent()


class Indices(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        return torch.full((3, 8, 8), i / 100.0), torch.tensor(i)  # a loss that stays finite


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, 1)
        self.seen: list[Any] = []  # (dtype of the conv output, input channels_last)

    def forward(self, x: Any) -> Any:
        y = self.conv(x)
        self.seen.append((y.dtype, x.is_contiguous(memory_format=torch.channels_last)))
        return self.head(y.mean(dim=(2, 3)))


def outcomes(agent: Agent) -> list[tuple[str, Any, bool, str | None]]:
    return [(o.name, o.value, o.ok, o.error) for o in agent.board.history]


def train(
    agent: Agent,
    loader: Any,
    model: Any,
    optimizer: Any,
    changes: dict[int, tuple[str, Any]] | None = None,
    epochs: int = 1,
) -> list[int]:
    """A user's loop; ``changes`` are requested after the given step. The sample indices
    every batch carried, in order."""
    seen: list[int] = []
    step = 0
    for _ in range(epochs):
        for x, index in loader:
            loss = model(x).float().pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            seen += index.tolist()
            if changes and step in changes:
                request(agent, *changes[step])
    return seen


def knob(agent: Agent, name: str) -> Any:
    return agent.board.knobs[name]


def setup(workers: int = 0, n: int = 64, batch: int = 4, **loader_args: Any) -> tuple[Any, ...]:
    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(
        Indices(n), batch_size=batch, num_workers=workers, **loader_args
    )
    return model, optimizer, loader


def test_every_builtin_is_declared_after_the_first_step_with_the_values_in_force(
    agent: Agent,
) -> None:
    model, optimizer, loader = setup()
    train(agent, loader, model, optimizer)
    specs = {k["name"]: k for k in agent.board.describe()}
    assert {n for n, s in specs.items() if s["builtin"]} == {
        "float32_matmul_precision", "cudnn_benchmark", "autocast", "compile",
        "channels_last", "num_workers", "pin_memory", "prefetch_factor",
        "persistent_workers", "optimizer_impl",
    }  # fmt: skip
    assert specs["num_workers"]["value"] == 0 and specs["channels_last"]["value"] is False
    assert specs["autocast"]["value"] == "off" and specs["autocast"]["choices"] == ["off", "bf16"]
    assert specs["optimizer_impl"]["value"] == "for-loop"  # SGD's default on the CPU
    assert specs["pin_memory"]["unavailable"] == "pinned memory needs CUDA"
    assert "TF32" in specs["float32_matmul_precision"]["numerics"]


def test_autocast_wraps_the_top_level_forward_and_its_revert_restores_the_class_forward(
    agent: Agent,
) -> None:
    model, optimizer, loader = setup()
    train(agent, loader, model, optimizer, {2: ("autocast", "bf16"), 8: ("autocast", "off")})
    dtypes = [dtype for dtype, _ in model.seen]
    assert dtypes[:3] == [torch.float32] * 3  # requested after step 2, applied after step 3
    assert dtypes[3:9] == [torch.bfloat16] * 6
    assert dtypes[9:] == [torch.float32] * (len(dtypes) - 9)
    assert "forward" not in model.__dict__  # the wrapper is gone with nothing left to do
    assert outcomes(agent) == [("autocast", "bf16", True, None), ("autocast", "off", True, None)]


def test_autocast_is_refused_where_the_script_enters_it_itself(agent: Agent) -> None:
    model, optimizer, loader = setup()
    for x, _ in itertools.islice(loader, 3):
        with torch.autocast("cpu", torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        optimizer.step()
    spec = knob(agent, "autocast")
    assert spec.unavailable and "enters torch.autocast (bfloat16) itself" in spec.unavailable
    request(agent, "autocast", "off")
    frames = agent.board.take_outbox()
    assert any(b"itself" in f and b"knob_applied" in f for f in frames)


def test_channels_last_converts_weights_and_batches_and_reverts_both(agent: Agent) -> None:
    model, optimizer, loader = setup()
    train(agent, loader, model, optimizer, {2: ("channels_last", True)})
    layout = torch.channels_last
    assert model.conv.weight.is_contiguous(memory_format=layout)
    assert [cl for _, cl in model.seen][:3] == [False] * 3 and all(c for _, c in model.seen[3:])
    request(agent, "channels_last", False)
    train(agent, loader, model, optimizer)
    assert model.conv.weight.is_contiguous() and "forward" not in model.__dict__


def test_channels_last_is_refused_for_a_model_without_convolutions(agent: Agent) -> None:
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(Indices(16), batch_size=4)
    train(agent, loader, model, optimizer)
    assert knob(agent, "channels_last").unavailable == "the model has no 2-D convolution"


def test_the_top_level_model_is_the_wrapper_that_holds_the_parameters(agent: Agent) -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = ConvNet()

        def forward(self, x: Any) -> Any:
            return self.inner(x)

    model = Wrapper()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(Indices(32), batch_size=4)
    train(agent, loader, model, optimizer, {2: ("autocast", "bf16")})
    assert "forward" in model.__dict__ and "forward" not in model.inner.__dict__


def test_matmul_precision_and_cudnn_benchmark_set_torchs_flags_and_put_them_back(
    agent: Agent,
) -> None:
    model, optimizer, loader = setup()
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark
    train(
        agent, loader, model, optimizer,
        {2: ("float32_matmul_precision", "high"), 3: ("cudnn_benchmark", True)},
    )  # fmt: skip
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == ("high", True)
    request(agent, "float32_matmul_precision", before[0])
    request(agent, "cudnn_benchmark", before[1])
    train(agent, loader, model, optimizer)
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == before


def test_the_optimizer_update_switches_to_foreach_and_fused_where_its_class_has_them(
    agent: Agent,
) -> None:
    model = ConvNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(Indices(64), batch_size=4)
    changes = {2: ("optimizer_impl", "foreach"), 6: ("optimizer_impl", "fused")}
    train(agent, loader, model, optimizer, changes)
    assert optimizer.param_groups[0]["fused"] is True
    assert [o[:3] for o in outcomes(agent)] == [
        ("optimizer_impl", "foreach", True), ("optimizer_impl", "fused", True),
    ]  # fmt: skip
    request(agent, "optimizer_impl", "for-loop")
    train(agent, loader, model, optimizer)
    assert optimizer.param_groups[0]["fused"] is False
    assert optimizer.param_groups[0]["foreach"] is False


def test_the_optimizer_findings_change_is_carried_by_the_builtin_update_knob(
    agent: Agent,
) -> None:
    # On a script that declares no knob, optimizer.for_loop's fused=True is the built-in's to
    # try: its role was "optimizer_impl", which no finding names, so the autopilot left it.
    from gputop_train.advise.rules import Change, Finding
    from gputop_train.autopilot.plan import candidates
    from gputop_train.session.phases import knob_state

    model = ConvNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    train(agent, torch.utils.data.DataLoader(Indices(8), batch_size=4), model, optimizer)
    knobs = [k for k in map(knob_state, agent.board.describe()) if k]
    slow = Finding("optimizer.for_loop", "t", (), "fused=True", "up to 1.2x", 0.7, 1.2,
                   changes=(Change("optimizer", "fused"),))  # fmt: skip
    assert [c.settings for c in candidates([slow], knobs, None)] == [(("optimizer_impl", "fused"),)]


def test_an_optimizer_with_one_implementation_is_refused(agent: Agent) -> None:
    model = ConvNet()
    optimizer = torch.optim.LBFGS(model.parameters())
    optimizer.step(lambda: 0.0)  # opens the first step without a loader
    assert knob(agent, "optimizer_impl").unavailable == "LBFGS has one implementation"


@pytest.mark.process  # DataLoader workers
@pytest.mark.parametrize("workers_before,workers_after", [(0, 2), (2, 0), (1, 2)])
@pytest.mark.parametrize("sampler", ["shuffled", "distributed"])
def test_a_worker_change_within_the_epoch_sees_every_index_once(
    agent: Agent, sampler: str, workers_before: int, workers_after: int
) -> None:
    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    dataset = Indices(96)

    def make_loader() -> Any:
        if sampler == "distributed":
            chosen: Any = torch.utils.data.DistributedSampler(
                dataset, num_replicas=2, rank=1, seed=3
            )
            args: dict[str, Any] = {"sampler": chosen}
        else:
            args = {"shuffle": True, "generator": torch.Generator().manual_seed(5)}
        return torch.utils.data.DataLoader(
            dataset, batch_size=4, num_workers=workers_before, **args
        )

    expected = [int(i) for _, index in make_loader() for i in index]  # no change: the order
    assert len(expected) == (48 if sampler == "distributed" else 96)
    loader = make_loader()
    seen = train(agent, loader, model, optimizer, {3: ("num_workers", workers_after)})
    assert outcomes(agent) == [("num_workers", workers_after, True, None)]
    assert len(seen) == len(set(seen)) and sorted(seen) == sorted(expected)
    assert seen == expected  # in the sampler's own order, too
    assert loader.num_workers == workers_after  # and the next epoch starts with it
    assert sorted(train(agent, loader, model, optimizer)) == sorted(expected)


@pytest.mark.process  # DataLoader workers
def test_prefetch_and_persistence_apply_and_a_bad_combination_is_refused(agent: Agent) -> None:
    model, optimizer, loader = setup(workers=2, persistent_workers=True)
    changes = {2: ("prefetch_factor", 4), 4: ("persistent_workers", False)}
    seen = train(agent, loader, model, optimizer, changes, epochs=2)
    assert sorted(seen) == sorted(list(range(64)) * 2)
    assert (loader.prefetch_factor, loader.persistent_workers) == (4, False)
    request(agent, "num_workers", 0)
    request(agent, "persistent_workers", True)
    train(agent, loader, model, optimizer)
    assert outcomes(agent)[-1][2:] == (
        False,
        "ValueError: persistent_workers needs num_workers > 0",
    )
    assert loader.num_workers == 0 and loader.persistent_workers is False


def test_loader_knobs_are_refused_for_an_iterable_dataset(agent: Agent) -> None:
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self) -> Iterator[Any]:
            return ((torch.zeros(3, 8, 8), torch.tensor(i)) for i in range(40))

    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    train(agent, torch.utils.data.DataLoader(Stream(), batch_size=4), model, optimizer)
    assert "IterableDataset" in (knob(agent, "num_workers").unavailable or "")


def test_compile_replaces_the_call_in_place_and_off_restores_the_eager_one(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled_calls = []
    real_compile = torch.compile

    def compile_on_eager_backend(fn: Any, **options: Any) -> Any:
        compiled_calls.append(options)
        return real_compile(fn, backend="eager", **options)  # no C++ toolchain needed

    monkeypatch.setattr(torch, "compile", compile_on_eager_backend)
    model, optimizer, loader = setup()
    train(agent, loader, model, optimizer, {2: ("compile", "default")})
    assert model._compiled_call_impl is not None and compiled_calls == [{}]
    request(agent, "compile", "off")
    train(agent, loader, model, optimizer)
    assert model._compiled_call_impl is None
    assert [o[:3] for o in outcomes(agent)] == [
        ("compile", "default", True),
        ("compile", "off", True),
    ]


def test_a_compile_that_fails_at_its_first_call_runs_eager_and_is_reverted(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_compile(fn: Any, **options: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("inductor: no compiler")

        return call

    monkeypatch.setattr(torch, "compile", broken_compile)
    model, optimizer, loader = setup()
    seen = train(agent, loader, model, optimizer, {2: ("compile", "default")})
    assert sorted(seen) == list(range(64))  # the step that failed ran eagerly: nothing lost
    assert model._compiled_call_impl is None and knob(agent, "compile").value == "off"
    last = agent.board.history[-1]
    assert last.reverted and "inductor: no compiler" in str(last.error)


def test_a_knob_failing_mid_apply_is_put_back(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputop_train.hook import loader_handover

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError("cannot start workers")

    model, optimizer, loader = setup(workers=0)
    monkeypatch.setattr(loader_handover, "_loader_for", fail)
    seen = train(agent, loader, model, optimizer, {2: ("num_workers", 2)})
    assert outcomes(agent) == [("num_workers", 0, False, "OSError: cannot start workers")]
    assert loader.num_workers == 0 and sorted(seen) == list(range(64))


@pytest.mark.process  # DataLoader workers
def test_two_worker_changes_in_one_epoch_still_see_every_index_once(agent: Agent) -> None:
    model, optimizer, loader = setup(workers=0, n=96, shuffle=True)
    changes = {2: ("num_workers", 2), 6: ("num_workers", 1)}
    seen = train(agent, loader, model, optimizer, changes)
    assert [o[:3] for o in outcomes(agent)] == [("num_workers", 2, True), ("num_workers", 1, True)]
    assert sorted(seen) == list(range(96))
    assert loader.num_workers == 1


def test_a_forward_wrapper_set_by_someone_else_is_kept_and_put_back(agent: Agent) -> None:
    model, optimizer, loader = setup()
    theirs = model.forward
    model.forward = theirs  # as accelerate sets its own wrapper on the instance
    train(agent, loader, model, optimizer, {2: ("autocast", "bf16"), 6: ("autocast", "off")})
    assert model.__dict__["forward"] is theirs


def test_matmul_precision_is_read_where_torch_refuses_its_legacy_getter(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch 2.11 raises once a script mixed the legacy and per-backend APIs (HF tf32=True).
    from gputop_train.hook.probes import float32_matmul_precision

    def refuse() -> str:
        raise RuntimeError("mix of the legacy and new APIs")

    monkeypatch.setattr(torch, "get_float32_matmul_precision", refuse)
    monkeypatch.setattr(torch.backends.cuda.matmul, "fp32_precision", "tf32", raising=False)
    assert float32_matmul_precision(torch) == "high"
    model, optimizer, loader = setup()
    train(agent, loader, model, optimizer)
    assert agent.enabled and knob(agent, "float32_matmul_precision").value == "high"
