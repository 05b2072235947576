"""What the hook costs busy_box's step, by part, from steps alternated in one process.

busy_box.py's JOB step (``--reps`` forward+backward passes of a Linear layer, then an SGD
step, one torch thread) under the hook, in runs of ``--steps`` steps in one of two states,
alternated (on, off, off, on, ...) and paired; a part's figure is the median of its pairs'
differences in the training thread's CPU time (``time.thread_time``), microseconds a step.
Adjacent short runs and CPU time, not blocks of wall time: the dev box's wall clock wanders
10-50% between blocks under the other sessions' load, a short run's CPU time far less.

Parts: ``floor``, a null hook (pass-through wrappers of the model's call and
``torch.autograd.backward``, an optimizer hook appending a clock read) against none: what
any Python-level hook of these entry points pays; ``all``, the hook's work behind its
wrappers (the agent enabled and the forward probe active, against both off); ``forward``
(the probe's forward marks and counts), ``backward`` (the agent's backward calls), ``step
end`` (the optimizer hooks' calls), each on against off with the rest on. Then the hook's
own thread's CPU over the run (/proc), as a share of a core.

    heavy -x .venv/bin/python -m benchmarks.overhead.busy_step_parts --pairs 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from gputop_train.hook import patches
from gputop_train.hook.agent import Agent

Switch = Callable[[bool], None]


def _thread_cpu_s(name: str) -> float:
    """CPU seconds of this process's thread called ``name`` (0 where there is none)."""
    for thread in threading.enumerate():
        if thread.name == name and thread.native_id is not None:
            with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _null_hook(model: Any) -> tuple[Switch, Callable[[], None]]:
    """Pass-through wrappers where the hook has its own, on while switched on; and what
    removes its optimizer hook."""
    cls, autograd = type(model), torch.autograd
    call, backward, on = cls.__call__, autograd.backward, [False]
    ends: list[float] = []

    def wrapped_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, *args, **kwargs)

    def wrapped_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        return backward(tensors, *args, **kwargs)

    def step_end(optimizer: Any, args: Any, kwargs: Any) -> None:
        if on[0]:
            ends.append(time.perf_counter())

    handle = register_optimizer_step_post_hook(step_end)

    def switch(value: bool) -> None:
        on[0] = value
        cls.__call__ = wrapped_call if value else call
        autograd.backward = wrapped_backward if value else backward  # type: ignore[attr-defined]

    return switch, handle.remove


def _hook_parts(agent: Agent) -> dict[str, Switch]:
    """Each part of the hook switched on or off, the rest left on."""
    probe, noop = agent._model, lambda *args, **kwargs: None
    methods = {"backward": ("on_backward", "on_backward_end"),
               "step end": ("on_optimizer_step", "on_optimizer_pre_step")}  # fmt: skip
    saved = {name: Agent.__dict__[name] for names in methods.values() for name in names}

    def stub(part: str) -> Switch:
        def switch(value: bool) -> None:
            for name in methods[part]:
                setattr(Agent, name, saved[name] if value else noop)

        return switch

    def enabled(value: bool) -> None:
        agent.enabled = probe.active = value

    return {"all": enabled, "forward": lambda value: setattr(probe, "active", value),
            "backward": stub("backward"), "step end": stub("step end")}  # fmt: skip


def paired_us(
    step: Callable[[], None], switch: Switch, pairs: int, steps: int
) -> tuple[float, float, float]:
    """Median of on-minus-off CPU time a step over ``pairs`` adjacent runs of ``steps`` steps,
    and its quartiles (us). Runs, not single steps: a switch that sets a class's attribute
    costs the next few calls their specialised bytecode (Python 3.11), which a single step
    would charge to the part."""
    differences = []
    for index in range(pairs):
        times = {}
        for value in (True, False) if index % 2 == 0 else (False, True):
            switch(value)
            started = time.thread_time()
            for _ in range(steps):
                step()
            times[value] = time.thread_time() - started
        differences.append((times[True] - times[False]) / steps * 1e6)
    switch(True)
    ordered = sorted(differences)
    return statistics.median(ordered), ordered[pairs // 4], ordered[3 * pairs // 4]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6, help="forward+backward a step")
    parser.add_argument("--pairs", type=int, default=200, help="pairs of runs per part")
    parser.add_argument("--steps", type=int, default=10, help="steps a run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Linear(256, 256)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256)

    def step() -> None:
        for _ in range(args.reps):
            model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    floor, remove_floor = _null_hook(model)
    for _ in range(200):  # warm-up, left out
        step()
    bare_started = time.thread_time()
    for _ in range(200):
        step()
    bare_us = (time.thread_time() - bare_started) / 200 * 1e6
    figures = {"floor": paired_us(step, floor, args.pairs, args.steps)}
    floor(False)
    remove_floor()
    agent = patches.install(torch)
    for _ in range(200):  # the model found, the hook's first steps left out
        step()
    for part, switch in _hook_parts(agent).items():
        figures[part] = paired_us(step, switch, args.pairs, args.steps)
    listener_s, started = _thread_cpu_s("gputop-train-hook"), time.monotonic()
    for _ in range(
        args.pairs * args.steps
    ):  # the whole hook, its thread sending what the steps made
        step()
    listener = (_thread_cpu_s("gputop-train-hook") - listener_s) / (time.monotonic() - started)
    print(f"bare step {bare_us:.0f} us of CPU, {args.reps} forward+backward a step, "
          f"{args.pairs} pairs of {args.steps} steps a part")  # fmt: skip
    for part, (median, low, high) in figures.items():
        print(f"  {part:9s} {median:+7.1f} us a step ({median / bare_us:+6.2%}), "
              f"quartiles {low:+.0f}..{high:+.0f}")  # fmt: skip
    print(f"  the hook's own thread: {listener:.2%} of a core")


if __name__ == "__main__":
    main()
