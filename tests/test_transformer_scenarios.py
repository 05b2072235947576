"""Each transformer scenario of the corpus, CPU-sized, starts, is hooked and is judged: the
step census (tokens, attention calls, the analytic FLOPs) reaches the monitor, and the advisor
and the MFU line run on it without error."""

from __future__ import annotations

import time

import pytest

from gputop_train.advise.mfu import efficiency
from gputop_train.advise.rules import findings
from gputop_train.session.stats import Observation
from tests.support.scenario_runs import hooked_scenario

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


def monitored(script: str, timeout_s: float = 240.0) -> Observation:
    """The scenario under the hook until the advisor has an observation (5 steps and 2 s past
    the warm-up): a step count fixed in advance is either too few on a loaded box or over
    inside the warm-up on a quiet one."""
    with hooked_scenario(f"{script}.py") as run:
        deadline = time.monotonic() + timeout_s
        while run.job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            window = run.session.clock() - run.session.started_at + 1
            observation = run.session.snapshot(window_s=window).observation
            if observation is not None:
                return observation
        raise AssertionError(run.stderr_tail() or f"no observation in {timeout_s:g} s")


@pytest.mark.torch
@pytest.mark.timeout(300)  # a CPU GPT under the hook on a loaded 2-core box
@pytest.mark.parametrize("script", sorted(TRANSFORMERS))
def test_a_transformer_scenario_runs_hooked_and_is_judged(script: str) -> None:
    observation = monitored(script)
    assert observation.steps.steps > 0
    workload = observation.workload
    assert workload.tokens and workload.sequence and workload.analytic_flops
    attention = (
        workload.manual_attention if TRANSFORMERS[script] == "manual" else workload.fused_attention
    )
    assert attention and attention > 0
    findings(observation)  # judged without error
    measure = efficiency(observation)
    assert measure.achieved_tflops is not None and measure.reason == "the job runs on the CPU"
