"""The in-process hook: standard library and torch only.

The launcher arms it through ``hook/boot/sitecustomize.py``; a script can also opt in::

    import gputop_train.hook
    gputop_train.hook.install()          # hook now, and listen on a private socket

Nothing is measured or opened until the process iterates a DataLoader or steps an
optimizer, so processes that merely import torch stay silent.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .patches import current_agent


def install() -> None:
    """Hook this process now (imports torch). Safe to call more than once."""
    import torch

    from .patches import install as install_patches

    install_patches(torch)


def count_samples(samples: int) -> None:
    """Report the samples of the current step, for loops without a DataLoader."""
    agent = current_agent()
    if agent is not None and agent.enabled:
        agent.count_samples(samples)


def count_tokens(tokens: int) -> None:
    """Report the tokens of the current step, where the model's forward inputs do not say
    (token ids made inside the model, packed sequences); overrides what the forwards saw."""
    agent = current_agent()
    if agent is not None and agent.enabled:
        agent.count_tokens(tokens)


def knob(
    name: str,
    value: bool | int | str,
    apply: Callable[[Any], None],
    *,
    help: str = "",
    choices: Sequence[Any] | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    role: str | None = None,
) -> None:
    """Declare a knob the monitor can change live; ``apply(new_value)`` runs on the training
    thread at a step boundary and should raise if it cannot take the value.

    The kind follows from the arguments: ``choices`` makes a choice, a bool value a switch,
    an int value a number within ``minimum``..``maximum``. ``role`` says what the knob does
    (``workers``, ``pin_memory``, ``batch_size``, ``precision``, ``compile``,
    ``channels_last``, ``input_format``, ``syncs``, ``persistent_workers``, or a tag of
    your own): the autopilot changes only knobs whose role a finding names (docs/knobs.md).
    Without a hook it does nothing.
    """
    from .knobs import Knob

    agent = current_agent()
    if agent is None or not agent.enabled:
        return
    spec = Knob(
        name, value, apply, help, tuple(choices) if choices else None, minimum, maximum, role
    )
    agent.board.declare(spec)


def revert_last_change(error: str) -> bool:
    """Undo the last knob change after it failed later (an OOM, a compile error).

    Returns True when there was a change to revert; the monitor shows ``error``.
    """
    agent = current_agent()
    return bool(agent is not None and agent.enabled and agent.revert_last_change(error))


def autopilot_active() -> bool:
    """True while ``gputop-train --autopilot`` drives this job and has not finished: a script
    whose own run is short (a demo's few epochs) can train on until the autopilot is done."""
    import os

    from .. import wire
    from .agent import _monitor_alive

    if os.environ.get(wire.AUTOPILOT_ENV) != "1":
        return False
    agent = current_agent()
    # A hook that is off never hears the monitor: the job must not wait for it forever.
    usable = agent is not None and agent.enabled
    return usable and not agent.autopilot_done and _monitor_alive()  # type: ignore[union-attr]


def arm() -> None:
    """Install the hook as soon as torch is imported, or right away if it already is."""
    if "torch" in sys.modules:
        install()
    elif not any(isinstance(f, _TorchImportWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchImportWatcher())


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Finds torch like the other finders would, and installs the hook once it has loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: Any) -> None:
            original_exec(module)
            try:
                from .patches import install as install_patches

                install_patches(module)
            except Exception as error:  # never break the user's `import torch`
                print(f"gputop-train hook not installed: {error!r}", file=sys.stderr)

        loader.exec_module = exec_module
        return spec
