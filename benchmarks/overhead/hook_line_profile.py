"""Where the hook's step end spends its time, line by line, on a fast loop: line_profiler
over the hook's per-step functions while the gpt workload trains hooked, a monitor reading.
Absolute figures carry the profiler's own cost (about a microsecond a line); the ranking is
what it is for (it found the step timer's event record, docs/benchmarks.md §13).

    pip install line_profiler      # or: pip install -e '.[bench]'
    python -m benchmarks.overhead.hook_line_profile --steps 2000
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from line_profiler import LineProfiler

from benchmarks.common.reader import start_reader
from benchmarks.overhead.hook_overhead import block_ms, gpt_workload
from gputop_train.hook import patches
from gputop_train.hook.agent import Agent
from gputop_train.hook.cuda_timer import CudaStepTimer
from gputop_train.hook.feeds import Feeds
from gputop_train.hook.loss_guard import LossGuard
from gputop_train.hook.model_probe import ModelProbe
from gputop_train.hook.step_parts import StepTimeline

PROFILED = (
    Agent.on_optimizer_step, Agent._finish_row, Agent._collect_gpu_times, Feeds.take,
    Agent._end_probes, Agent._begin_step, Agent._memory, Agent._take_awaiting,
    Agent.on_optimizer_pre_step, Agent.on_backward, Agent.on_backward_end,
    ModelProbe.end_step, ModelProbe.row, ModelProbe._pre_forward,
    StepTimeline.end_step, StepTimeline.resolve, LossGuard.end_step,
    CudaStepTimer.poll, CudaStepTimer.mark_end,
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cpu":
        torch.set_num_threads(1)  # as hook_overhead.py
    patches.install(torch)
    step = gpt_workload(device)
    for _ in range(100):
        step()
    reader = start_reader(os.getpid(), 900.0)
    time.sleep(1.0)
    for round_ in range(3):  # the loop's pace bare and hooked, for scale
        patches.uninstall()
        bare = block_ms(step, 500, sync)[1]
        patches.install(torch)
        hooked = block_ms(step, 500, sync)[1]
        print(f"round {round_}: bare {bare:.3f} ms, hooked {hooked:.3f} ms a step")
    profiler = LineProfiler()
    for function in PROFILED:
        profiler.add_function(function)
    profiler.enable_by_count()
    profiled = block_ms(step, args.steps, sync)[1]
    profiler.disable_by_count()
    print(f"profiled: {profiled:.3f} ms a step")
    profiler.print_stats(output_unit=1e-6, stripzeros=True)
    reader.terminate()


if __name__ == "__main__":
    main()
