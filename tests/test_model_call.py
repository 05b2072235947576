"""The model's class ``__call__`` wrapped for one instance (hook/model_call.py): marks only
that instance's calls, leaves no trace on the module, and puts the class back as it was."""

from __future__ import annotations

import copy
import io
from typing import TYPE_CHECKING, Any

import pytest

from gputop_train.hook.model_call import CallWrap

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x: Any) -> Any:
        return self.linear(x)


class OwnCall(Net):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


def wrap(module: Any, seen: list[str]) -> CallWrap:
    return CallWrap(
        module,
        lambda m, args, kwargs: seen.append(f"start {args[0].shape[0]}"),
        lambda: seen.append("end"),
        lambda: False,
    )


def test_only_the_models_calls_are_marked_and_copies_carry_nothing() -> None:
    model, seen = Net(), list[str]()
    wrapper = wrap(model, seen)
    x = torch.ones(3, 2)
    assert torch.equal(model(x), model.forward(x))
    copied = copy.deepcopy(model)  # an EMA: nothing of the hook is in the module's state
    torch.save(model, io.BytesIO())
    copied(x)
    Net()(x)
    assert seen == ["start 3", "end"]
    wrapper.remove()
    assert "__call__" not in Net.__dict__  # inherited again
    model(x)
    assert seen == ["start 3", "end"]


def test_a_class_with_its_own_call_gets_it_back() -> None:
    own = OwnCall.__dict__["__call__"]
    model, seen = OwnCall(), list[str]()
    wrapper = wrap(model, seen)
    model(torch.ones(1, 2))
    wrapper.remove()
    assert OwnCall.__dict__["__call__"] is own and seen == ["start 1", "end"]


def test_wrapped_again_by_someone_else_ours_passes_through_once_removed() -> None:
    model, seen = Net(), list[str]()
    ours = wrap(model, seen)
    theirs = Net.__call__
    Net.__call__ = lambda self, *a, **k: theirs(self, *a, **k)  # type: ignore[method-assign]
    try:
        ours.remove()  # theirs stays on top; ours under it now passes every call through
        model(torch.ones(2, 2))
        assert seen == []
    finally:
        del Net.__call__
