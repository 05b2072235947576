"""Which module is the model, and what its training forwards receive: samples and tokens.

The model is the outermost ``nn.Module`` that holds the stepping optimizer's parameters,
found once among the objects the training loop's frames can see (its locals, and the
attributes of objects such as ``self`` or a trainer). A wrapper (DDP, FSDP,
``torch.compile``'s OptimizedModule) is the outermost one; its calls are marked in eager
Python, around any compiled graph (model_call.py), as are those of a module compiled in
place (``model.compile()``).
"""

from __future__ import annotations

import inspect
import os
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

# Frames walked up from the optimizer's step to the loop: the hook's own, the optimizer's
# wrappers (profile hook, GradScaler, Accelerate, Lightning's strategy) and the loop's.
_MAX_FRAMES = 40
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Keyword names under which models take their token ids and padding mask (Hugging Face).
_TOKEN_KEYS = ("input_ids", "idx", "tokens")
_MASK_KEY = "attention_mask"


def optimizer_params(optimizer: Any) -> list[Any]:
    return [p for group in getattr(optimizer, "param_groups", ()) for p in group.get("params", ())]


def find_model(torch_module: Any, optimizer: Any, frame: Any) -> tuple[list[Any], str | None]:
    """The outermost modules holding ``optimizer``'s parameters, seen from ``frame`` and its
    callers, and None; or [] and why none can be timed."""
    module_cls = torch_module.nn.Module
    wanted = {id(p) for p in optimizer_params(optimizer)}
    if not wanted:
        return [], "the optimizer holds no parameters"
    found: dict[int, Any] = {}
    for value in _visible_objects(frame, module_cls):
        if id(value) not in found and any(id(p) in wanted for p in value.parameters()):
            found[id(value)] = value
    inner = {id(sub) for module in found.values() for sub in module.modules() if sub is not module}
    top = [module for key, module in found.items() if key not in inner]
    if not top:
        return [], (
            "no nn.Module holding the optimizer's parameters is visible from the loop that "
            "steps it; call gputop_train.hook.count_samples / count_tokens"
        )
    if len(top) > 1:
        names = ", ".join(sorted({type(m).__name__ for m in top}))
        return [], (
            f"{len(top)} models ({names}) train under one optimizer, each called on its own: "
            "no single forward to count or time"
        )
    return top, None


def _visible_objects(frame: Any, module_cls: type) -> Iterator[Any]:
    """Modules among the locals of the loop's frames, and one attribute level below them."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(_OUR_DIR):
            for value in _locals_of(frame):
                if isinstance(value, module_cls):
                    yield value
                elif not isinstance(value, (type, types.ModuleType)):
                    attributes = getattr(value, "__dict__", None)
                    if isinstance(attributes, dict):
                        for attribute in list(attributes.values()):
                            if isinstance(attribute, module_cls):
                                yield attribute
        frame = frame.f_back


def _locals_of(frame: Any) -> list[Any]:
    """A frame's local values, leaving no snapshot behind: before Python 3.13 reading a
    function's ``f_locals`` stores a dict on the frame that keeps every local it saw alive
    after the loop deletes it (a sweep's dropped model and optimizer; tests' 'dropped')."""
    values = list(frame.f_locals.values())
    if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        frame.f_locals.clear()  # the snapshot only: any later read fills it again
    return values


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "device")


def first_input(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """The tensor a forward's batch is read from: token ids by their usual names, else the
    first tensor argument, else the first tensor keyword argument; None when there is none."""
    for key in _TOKEN_KEYS:
        if _is_tensor(kwargs.get(key)):
            return kwargs[key]
    for value in args:
        if _is_tensor(value):
            return value
    for value in kwargs.values():
        if _is_tensor(value):
            return value
    return None


def count_inputs(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[int, int | None, Any]:
    """(samples, tokens, mask) of one forward call: samples from the first input's leading
    dimension; tokens batch x sequence for integer inputs of two or more dimensions; the
    2-D padding mask whose sum is the non-padding tokens, when one matches them (its sum is
    left to the caller, which must not wait for a GPU). ValueError when no tensor came in."""
    # The common call, model(x, ...): its first argument, without the search below.
    leaf = args[0] if args and not kwargs and _is_tensor(args[0]) else first_input(args, kwargs)
    if leaf is None or not len(leaf.shape):
        raise ValueError("the model's forward took no tensor with a batch dimension")
    samples = int(leaf.shape[0])
    dtype = leaf.dtype
    if dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool":
        return samples, None, None
    if len(leaf.shape) < 2:
        return samples, None, None
    tokens = samples * int(leaf.shape[1])
    mask: Any = kwargs.get(_MASK_KEY)
    if _is_tensor(mask) and tuple(mask.shape) == tuple(leaf.shape[:2]):
        return samples, tokens, mask
    return samples, tokens, None


class MaskCounts:
    """Non-padding token counts of the step's masks, summed without a sync: a mask on the
    CPU is summed at once; one on the GPU gets a reduction and an asynchronous copy to
    pinned memory, read once the step's end event has completed."""

    def __init__(self) -> None:
        self.known = 0
        self.pending: list[Any] = []

    def add(self, mask: Any) -> None:
        if mask.device.type == "cpu":
            self.known += int(mask.sum())
            return
        import torch

        total = mask.sum(dtype=torch.int64)
        host = torch.empty((), dtype=torch.int64, pin_memory=True)
        host.copy_(total, non_blocking=True)
        self.pending.append(host)

    def total(self) -> int:
        """The sum; only once the step's GPU work has completed (the caller's end event)."""
        return self.known + sum(int(host) for host in self.pending)


def describe_module(module: Any) -> str:
    inner = getattr(module, "_orig_mod", None) or getattr(module, "module", None)
    name = type(module).__name__
    return f"{name}({type(inner).__name__})" if inner is not None else name
