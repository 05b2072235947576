"""Each transformer scenario of the corpus, CPU-sized, starts, is hooked and is judged: the
step census (tokens, attention calls, the analytic FLOPs) reaches the monitor, and the advisor
and the MFU line run on it without error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gputop_train import events
from gputop_train.advise.mfu import efficiency
from gputop_train.advise.rules import findings
from gputop_train.collect.fake import FakeGpu, FakeNvml
from gputop_train.job.launched import hook_environment
from gputop_train.monitor.monitor import Monitor
from gputop_train.session.model import Session
from tests.support.paths import REPO

SCENARIOS = REPO / "benchmarks" / "scenarios"
# name -> (attention calls are hand-written, the loop embeds tokens)
TRANSFORMERS = {
    "nanogpt_eager": "fused",
    "gpt_fp32": "fused",
    "gpt_manual_attention": "manual",
    "gpt_memory_limit": "fused",
    "gpt_trainer_sync": "fused",
    "gpt_tokenizer_loader": "fused",
    "gpt_compiled_sdpa": "fused",
}


def monitored(script: str, steps: int = 40) -> Session:
    """The scenario for ``steps`` steps (the advisor needs 5 past the warm-up, which is also
    the phase's first 3 s: on a loaded box 14 steps fitted in it) under the hook
    and a monitor that sees a fake idle H100 beside the CPU job."""
    job = subprocess.Popen(
        [sys.executable, str(SCENARIOS / f"{script}.py"), "--steps", str(steps)],
        env=hook_environment(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    session = Session(command=(script,))
    monitor = Monitor(session, job.pid, nvml=FakeNvml([FakeGpu(util=3, mem_used=2**30)]))
    monitor.start()
    try:
        _, stderr = job.communicate(timeout=240)
        monitor.drain(3.0)
        session.apply(events.JobEnded(job.returncode))
    finally:
        monitor.stop()
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, stderr.decode()[-2000:]
    return session


@pytest.mark.torch
@pytest.mark.timeout(300)  # a CPU GPT under the hook on a loaded 2-core box
@pytest.mark.parametrize("script", sorted(TRANSFORMERS))
def test_a_transformer_scenario_runs_hooked_and_is_judged(script: str) -> None:
    session = monitored(script)
    observation = session.snapshot(window_s=session.clock() - session.started_at + 1).observation
    assert observation is not None and observation.steps.steps > 0
    workload = observation.workload
    assert workload.tokens and workload.sequence and workload.analytic_flops
    attention = (
        workload.manual_attention if TRANSFORMERS[script] == "manual" else workload.fused_attention
    )
    assert attention and attention > 0
    findings(observation)  # judged without error
    measure = efficiency(observation)
    assert measure.achieved_tflops is not None and measure.reason == "the job runs on the CPU"
