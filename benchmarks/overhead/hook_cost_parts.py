"""Where the hook's cost on a fast loop goes: blocks of one workload with the hook removed,
whole, or with one part of it stubbed out, cycled in one process; then cProfile of 600 steps
bare and hooked. A part whose stub brings a block back to the bare time is the cost.

    python -m benchmarks.overhead.hook_cost_parts gpt  # nanoGPT-style, no DataLoader (GPU or CPU)
    python -m benchmarks.overhead.hook_cost_parts tiny    # the ~2 ms MLP with a DataLoader
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common.reader import start_reader
from benchmarks.overhead.hook_overhead import block_ms, gpt_workload, tiny_workload
from gputop_train.hook import patches
from gputop_train.hook.agent import Agent
from gputop_train.hook.cuda_timer import CudaStepTimer
from gputop_train.hook.feeds import Feeds
from gputop_train.hook.loss_guard import LossGuard
from gputop_train.hook.outbox import Outbox
from gputop_train.hook.primary import PRIMARY, PrimaryElection
from gputop_train.hook.probe_schedule import ProbeSchedule
from gputop_train.hook.step_parts import StepTimeline
from gputop_train.hook.step_ring import StepRing
from gputop_train.hook.workload_probes import WorkloadProbes

Undo = Callable[[], None]


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _stub(cls: type, name: str, value: Callable[..., Any] = _noop) -> Undo:
    original = cls.__dict__[name]
    setattr(cls, name, value)
    return lambda: setattr(cls, name, original)


def _stubs(*pairs: tuple[type, str]) -> Undo:
    return _stubs_with(*((cls, name, _noop) for cls, name in pairs))


def _forward_off(agent: Agent) -> Undo:
    agent._model.active = False
    return lambda: setattr(agent._model, "active", True)


def variants(agent: Agent) -> dict[str, Callable[[], Undo] | None]:
    """Each variant's set-up (None: the hook removed); its return value undoes it."""
    return {
        "bare": None,
        "full": lambda: _noop,
        "-opt_step": lambda: _stub(Agent, "on_optimizer_step"),
        "-opt_pre": lambda: _stub(Agent, "on_optimizer_pre_step"),
        "-backward": lambda: _stubs((Agent, "on_backward"), (Agent, "on_backward_end")),
        "-forward": lambda: _forward_off(agent),
        "-timer": lambda: _stubs((CudaStepTimer, "mark_start"), (CudaStepTimer, "mark_end")),
        "-guard": lambda: _stubs((LossGuard, "on_backward"), (LossGuard, "end_step")),
        "-marks": lambda: _stub(StepTimeline, "mark"),
        "-end_probes": lambda: _stub(Agent, "_end_probes"),
        # The hook as on a CPU job: no CUDA events, step timer, memory reads or sync scans.
        "-cuda": lambda: _stub(Agent, "_cuda_in_use", lambda self: False),
        # Inside the step's end: rows still made but not kept (hook/step_ring.py), or
        # (-rows_sent) kept but never sent.
        "-finish_row": lambda: _stub(StepRing, "finish"),
        "-collect_gpu": lambda: _stub(StepRing, "collect"),
        "-memory": lambda: _stub(Agent, "_memory", lambda self, now, cuda: (None, None, None)),
        "-rows_sent": lambda: _rows_unsent(agent),
        # The agent's parts, each alone (hook/feeds.py, primary.py, probe_schedule.py,
        # outbox.py, workload_probes.py): the loader feeds (no data wait, samples or loader
        # facts), the election (every optimizer step counts), the training thread's gate (its
        # events handled without it), the probe schedule (no probe ever due), the outbox (no
        # fact kept) and the workload probes' step end.
        "-feeds": lambda: _feeds_off(),
        "-primary": lambda: _stub(PrimaryElection, "elect", lambda self, optimizer: PRIMARY),
        "-gate": lambda: _gate_off(),
        "-schedule": lambda: _schedule_off(agent),
        "-outbox": lambda: _stub(Outbox, "publish"),
        "-workload": lambda: _stub(WorkloadProbes, "end"),
    }


def _stubs_with(*triples: tuple[type, str, Callable[..., Any]]) -> Undo:
    undos = [_stub(cls, name, value) for cls, name, value in triples]

    def undo_all() -> None:
        for undo in undos:
            undo()

    return undo_all


def _schedule_off(agent: Agent) -> Undo:
    """No probe ever due: the schedule's steps out of reach, its model check stubbed."""
    schedule, steps = agent._schedule, (agent._schedule.count_step, agent._schedule.profile_step)
    schedule.count_step = schedule.profile_step = -1
    undo = _stub(ProbeSchedule, "model_due", lambda self, step: False)

    def undo_all() -> None:
        schedule.count_step, schedule.profile_step = steps
        undo()

    return undo_all


def _rows_unsent(agent: Agent) -> Undo:
    """The listener asks for no rows: it holds the ring's ``rows_after`` bound at its start,
    so the stub goes on the listener itself."""
    listener = agent.listener
    original = listener._rows_after
    listener._rows_after = lambda step: []
    return lambda: setattr(listener, "_rows_after", original)


def _gate_off() -> Undo:
    """Each event the gate guards (primary.primary_thread_only) handled without it."""
    gated = [name for name, value in vars(Agent).items() if hasattr(value, "__wrapped__")]
    return _stubs_with(*((Agent, name, vars(Agent)[name].__wrapped__) for name in gated))


def _feeds_off() -> Undo:
    return _stubs_with(
        (Feeds, "started", _noop),
        (Feeds, "batch", _noop),
        (Feeds, "exhausted", _noop),
        (Feeds, "take", lambda self, publish: (0.0, None, 0)),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=("gpt", "tiny"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=150, help="steps per block")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile part")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else _noop
    if device == "cpu":
        torch.set_num_threads(1)  # as hook_overhead.py: the 2-core box's pool spins otherwise
    agent = patches.install(torch)
    step = (gpt_workload if args.workload == "gpt" else tiny_workload)(device)
    for _ in range(60):
        step()
    reader = start_reader(os.getpid(), 900.0)
    time.sleep(1.0)

    def block(steps: int) -> float:
        return block_ms(step, steps, sync)[1]  # the block's mean: what throughput follows

    setups = variants(agent)
    means: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(args.rounds):
        for name, setup in setups.items():
            if setup is None:
                patches.uninstall()
                means[name].append(block(args.steps))
                patches.install(torch)
                step()
                continue
            undo = setup()
            means[name].append(block(args.steps))
            undo()
    print(f"{args.workload} on {device}: block means, ms a step (median of {args.rounds} blocks)")
    bare = statistics.median(means["bare"])
    for name, values in means.items():
        median = statistics.median(values)
        print(
            f"  {name:12s} {median:.3f} ms {(median / bare - 1) * 100:+6.1f}% vs bare"
            f"   spread {min(values):.3f}-{max(values):.3f}"
        )
    for label, hooked in () if args.no_profile else (("bare", False), ("hooked", True)):
        patches.install(torch) if hooked else patches.uninstall()
        profile = cProfile.Profile()
        profile.enable()
        block(600)
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(22)
        print(f"== cProfile {label}, 600 steps\n{text.getvalue()[-5200:]}")
    patches.install(torch)
    reader.terminate()


if __name__ == "__main__":
    main()
