"""Wraps the two torch entry points that reveal a training step, without editing the script.

``_BaseDataLoaderIter.__next__`` (time blocked on data, and the batch) and a global
optimizer step post-hook (the step boundary); ``DataLoader.__init__`` notes where the script
constructed each loader (code_sites.py), once per construction. User exceptions pass
through untouched; our own errors disable the agent and the original call's result is
returned as if we were not there.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import os
import sys
import time
from typing import Any

from . import code_sites, collectives, loader_handover
from .agent import Agent

_state: dict[str, Any] = {"agent": None, "installed": False, "undo": []}


def current_agent() -> Agent | None:
    return _state["agent"]


def install(torch_module: Any) -> Agent:
    """Patch torch once per process; later calls return the existing agent."""
    if _state["installed"]:
        return _state["agent"]
    # Collectives report to whichever agent is current (a forked child has its own).
    clock = collectives.CollectiveClock(torch_module, _collective_notice)
    _state["clock"] = clock
    _patch_dataloader()
    _patch_autocast()
    _patch_backward_and_clipping(torch_module, clock)
    _register_optimizer_hook()
    _state["installed"] = True
    if _state["agent"] is None:
        _state["agent"] = Agent(torch_module)
        # A forked child (a DataLoader worker, a fork-started rank) gets a fresh, dormant
        # agent: it opens its own socket only if it trains.
        os.register_at_fork(after_in_child=lambda: _state.update(agent=_child_agent(torch_module)))
        atexit.register(_shutdown)
    _time_collectives(clock)
    return _state["agent"]


def _time_collectives(clock: collectives.CollectiveClock) -> None:
    _state["agent"].collectives = clock
    try:
        collectives.install(clock, _state["undo"])
    except Exception as error:
        clock._fail(error)


def _child_agent(torch_module: Any) -> Agent:
    agent = Agent(torch_module)
    agent.collectives = _state.get("clock")
    return agent


def _collective_notice(text: str) -> None:
    agent = _state["agent"]
    if agent is not None:
        agent.notice(text)


def uninstall() -> None:
    """Restore torch's own entry points (the agent and its socket stay, idle)."""
    for undo in reversed(_state["undo"]):
        undo()
    _state["undo"].clear()
    _state["installed"] = False
    agent = _state["agent"]
    if agent is not None:
        agent.forget_model()  # its module hooks too; found again after the next install


def _guarded(method_name: str, *args: Any) -> None:
    agent = _state["agent"]
    if agent is None or not agent.enabled:
        return
    try:
        getattr(agent, method_name)(*args)
    except Exception as error:
        agent.fail(error)


def _patch_dataloader() -> None:
    dataloader = importlib.import_module("torch.utils.data.dataloader")
    iterator_cls = dataloader._BaseDataLoaderIter
    original_next = iterator_cls.__next__
    original_iter = dataloader.DataLoader.__iter__
    original_init = dataloader.DataLoader.__init__
    torch_root = code_sites.torch_dir(importlib.import_module("torch"))

    def __next__(self: Any) -> Any:
        started = time.perf_counter()
        try:
            handover = loader_handover.active(self)  # a live settings change took it over
            batch = handover.take_next() if handover is not None else original_next(self)
        except StopIteration:
            _guarded("on_iterator_exhausted", time.perf_counter() - started, self)
            raise
        _guarded("on_batch", time.perf_counter() - started, batch, self)
        return batch

    def __iter__(self: Any) -> Any:
        started = time.perf_counter()
        iterator = original_iter(self)
        _guarded("on_iterator_created", time.perf_counter() - started, self, iterator)
        return iterator

    @functools.wraps(original_init)  # inspect.signature(DataLoader) still reads torch's
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        # Once per construction, never per batch: a walk up a few frames.
        with contextlib.suppress(Exception):
            code_sites.note_loader(self, sys._getframe(1), torch_root)

    __next__.__wrapped__ = original_next  # type: ignore[attr-defined]
    __iter__.__wrapped__ = original_iter  # type: ignore[attr-defined]
    iterator_cls.__next__ = __next__
    dataloader.DataLoader.__iter__ = __iter__
    dataloader.DataLoader.__init__ = __init__

    def undo() -> None:
        iterator_cls.__next__ = original_next
        dataloader.DataLoader.__iter__ = original_iter
        dataloader.DataLoader.__init__ = original_init

    _state["undo"].append(undo)


def _patch_autocast() -> None:
    """Note each autocast entered, for the precision facts (probes.model_facts)."""
    autocast_cls = importlib.import_module("torch.amp.autocast_mode").autocast
    original_enter = autocast_cls.__enter__

    def __enter__(self: Any) -> Any:
        result = original_enter(self)
        if getattr(self, "_enabled", False):
            _guarded("on_autocast", getattr(self, "fast_dtype", None))
        return result

    __enter__.__wrapped__ = original_enter  # type: ignore[attr-defined]
    autocast_cls.__enter__ = __enter__

    def undo() -> None:
        autocast_cls.__enter__ = original_enter

    _state["undo"].append(undo)


def _patch_backward_and_clipping(torch_module: Any, clock: collectives.CollectiveClock) -> None:
    """Note the loss (the scalar the backward starts from) and the gradient norm the script
    clips to, for the numerics guard (loss_guard.py): a reference each, no copy, no sync;
    when the backward starts and returns, for the step breakdown (model_probe.py); and, once
    a DDP model exists, when it returns for DDP's all-reduce wait (collectives.py).

    ``torch.autograd.backward`` is wrapped, not ``Tensor.backward``: ``loss.backward()`` calls
    it (looked up on the module at each call), and so does a loop that calls it itself. One
    wrapper does all three, each concern a plain call: it runs on every backward of the job,
    where three nested Python layers were a visible part of a fast CPU loop's cost (issue 46,
    docs/benchmarks.md section 16). The agent's calls are guarded as ``_guarded``'s are, inline."""
    autograd = importlib.import_module("torch.autograd")
    original_backward = autograd.backward
    utils = importlib.import_module("torch.nn.utils")
    original_clip = utils.clip_grad_norm_
    tensor_cls = torch_module.Tensor
    state = _state

    running = [0]  # backwards in progress: reentrant checkpointing runs one inside another

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if running[0]:  # inside the step's backward (its autograd thread on a GPU)
            try:
                return original_backward(tensors, *args, **kwargs)
            finally:
                if clock.ddp_models:
                    clock.backward_returned()
        agent = state["agent"]
        hooked = agent is not None and agent.enabled
        if hooked:
            try:
                loss = tensors if type(tensors) is tensor_cls else _only_tensor(tensors, tensor_cls)
                agent.on_backward(loss)
            except Exception as error:
                agent.fail(error)
        running[0] += 1
        try:
            result = original_backward(tensors, *args, **kwargs)
        finally:
            running[0] -= 1
            if clock.ddp_models:
                clock.backward_returned()
        if hooked and agent.enabled:  # the step breakdown's end of the backward
            try:
                agent.on_backward_end()
            except Exception as error:
                agent.fail(error)
        return result

    def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
        norm = original_clip(*args, **kwargs)
        _guarded("on_grad_norm", norm)
        return norm

    backward.__wrapped__ = original_backward  # type: ignore[attr-defined]
    clip_grad_norm_.__wrapped__ = original_clip  # type: ignore[attr-defined]
    autograd.backward = backward  # type: ignore[attr-defined]
    utils.clip_grad_norm_ = clip_grad_norm_  # type: ignore[attr-defined]

    def undo() -> None:
        autograd.backward = original_backward  # type: ignore[attr-defined]
        utils.clip_grad_norm_ = original_clip  # type: ignore[attr-defined]

    _state["undo"].append(undo)


def _only_tensor(tensors: Any, tensor_cls: type) -> Any:
    """The one tensor a backward starts from (a loss), or None for several (``backward`` of
    a list of outputs, as a multi-task loop may call it)."""
    if isinstance(tensors, tensor_cls):
        return tensors
    if isinstance(tensors, (list, tuple)) and len(tensors) == 1:
        return tensors[0] if isinstance(tensors[0], tensor_cls) else None
    return None


def _optimizer_hook(method: str) -> Any:
    """A torch optimizer hook calling the agent's ``method``, guarded as ``_guarded`` does but
    inline: it runs at every step."""
    state = _state

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        agent = state["agent"]
        if agent is not None and agent.enabled:
            try:
                getattr(agent, method)(optimizer)
            except Exception as error:
                agent.fail(error)

    return hook


def _register_optimizer_hook() -> None:
    after_step = _optimizer_hook("on_optimizer_step")
    before_step = _optimizer_hook("on_optimizer_pre_step")
    optimizer_module = importlib.import_module("torch.optim.optimizer")
    handle = optimizer_module.register_optimizer_step_post_hook(after_step)
    _state["undo"].append(handle.remove)
    pre_handle = optimizer_module.register_optimizer_step_pre_hook(before_step)
    _state["undo"].append(pre_handle.remove)


def _shutdown() -> None:
    agent = _state["agent"]
    if agent is None:
        return
    try:
        agent.shutdown()
    except Exception as error:
        agent.fail(error)
