"""MFU: the step's FLOPs counted two ways (the census's nanoGPT/torchtitan formula against
FlopCounterMode), the peak at the matmul precision in force, and N/A with its reason."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from gputop_train.advise import mfu
from gputop_train.advise.mfu import efficiency
from gputop_train.hook.kernel_profile import kernel_facts
from gputop_train.session.workload import Workload
from tests.support.observations import BF16_H100, FP32_H100
from tests.support.observations import observe as observe_any

if TYPE_CHECKING:
    import torch

    from gputop_train.session.model import Session
    from gputop_train.session.stats import Observation
else:
    torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from gpt import GPT, GPTConfig

from gputop_train.hook.workload import Census


def census_of_step(model: GPT, micro_batches: int, batch: int = 2) -> dict:
    """One optimizer step of ``micro_batches`` forward/backward passes under the census,
    beside FlopCounterMode; the census's facts and the counter's total."""
    from torch.utils.flop_counter import FlopCounterMode

    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    census = Census()
    counter = FlopCounterMode(display=False)
    with counter:
        census.start()
        block = model.config.block
        for _ in range(micro_batches):
            x = torch.randint(model.config.vocab, (batch, block))
            model(x, x.roll(-1, dims=1)).backward()
        census.optimizer_started()
        optimizer.step()
        census.stop()
    facts = census.facts([p for g in optimizer.param_groups for p in g["params"]])
    facts["measured"] = counter.get_total_flops()
    return facts


def test_the_analytic_count_is_nanogpts_formula_read_from_the_calls() -> None:
    model = GPT(GPTConfig.tiny())
    model.set_attention("manual")  # softmax(q @ k^T) @ v: the head size read from q @ k^T
    facts = census_of_step(model, micro_batches=3)
    tokens = 3 * 2 * model.config.block  # accumulation: every micro-batch's tokens
    assert facts["tokens"] == tokens and facts["sequence"] == model.config.block
    assert facts["analytic_flops"] == model.flops_per_token() * tokens
    # N drops the position table (lookups only) and keeps the token table tied to the output.
    assert facts["non_embedding_params"] == facts["params"] - model.wpe.weight.numel()
    assert facts["manual_attention"] == 3 * model.config.layers and facts["fused_attention"] == 0
    # The FLOP counter sees the same matmuls (and the attention's): within 15%.
    assert facts["analytic_flops"] == pytest.approx(facts["measured"], rel=0.15)
    assert facts["optimizer_ops"] > 0 and facts["ops"] > facts["optimizer_ops"]


def test_sdpa_calls_are_counted_as_fused_attention_with_the_same_formula() -> None:
    model = GPT(GPTConfig.tiny())
    model.set_attention("sdpa")
    facts = census_of_step(model, micro_batches=1)
    assert facts["fused_attention"] == model.config.layers and facts["manual_attention"] == 0
    assert facts["analytic_flops"] == model.flops_per_token() * 2 * model.config.block


def test_an_untied_output_layer_keeps_its_parameters_and_drops_the_token_table() -> None:
    model = GPT(GPTConfig.tiny())
    model.head.weight = torch.nn.Parameter(model.wte.weight.detach().clone())  # untied
    facts = census_of_step(model, micro_batches=1)
    tables = model.wte.weight.numel() + model.wpe.weight.numel()
    assert facts["non_embedding_params"] == facts["params"] - tables


def test_a_model_without_token_inputs_has_no_analytic_count_and_says_why() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    census = Census()
    census.start()
    net(torch.randn(4, 8)).sum().backward()
    census.stop()
    facts = census.facts(list(net.parameters()))
    assert facts["analytic_flops"] is None and "no token embedding" in facts["analytic_note"]


# -- what is shown ------------------------------------------------------------------------


def observe(**changes: Any) -> Observation:
    """An observation whose counted step's samples are unknown (no batch scaling)."""
    return observe_any(**{"flops_per_sample": None, **changes})


def test_a_batch_changed_since_the_count_scales_the_counted_flops() -> None:
    # Counted on a step of 10 samples; the window runs 500 samples a step at 10 steps/s.
    o = observe_any(flops_per_step=1.0e12, flops_per_sample=1.0e11)
    e = efficiency(o)
    assert e.scaled_by == pytest.approx(50.0)
    assert e.achieved_tflops == pytest.approx(1.0e12 * 50 * 10 / 1e12)
    assert any("scaled x50" in note for note in e.notes())
    same = efficiency(observe_any(flops_per_step=1.0e12, flops_per_sample=2.0e9))  # 500 a step
    assert same.scaled_by is None and same.achieved_tflops == pytest.approx(10.0)


def test_the_analytic_count_is_shown_and_a_gap_over_15_percent_is_said() -> None:
    both = observe(flops_per_step=1.0e12, workload=Workload(analytic_flops=int(1.05e12)))
    e = efficiency(both)
    assert e.source == mfu.ANALYTIC and e.achieved_tflops == pytest.approx(10.5)
    assert not e.disagrees
    recompute = replace(both, flops_per_step=1.4e12)  # checkpointing recomputes the forward
    e = efficiency(recompute)
    assert e.disagrees and any("disagree by -25%" in n for n in e.notes())
    measured_only = efficiency(observe(flops_per_step=1.0e12))
    assert measured_only.source == mfu.MEASURED


def test_the_peak_follows_the_matmul_precision_not_cudnns_flag() -> None:
    transformer = Workload(tokens=8192, analytic_flops=10**12)
    fp32 = observe(model=FP32_H100, workload=transformer)  # tf32_cudnn on, matmuls "highest"
    assert efficiency(fp32).precision == "fp32" and efficiency(fp32).datasheet_tflops == 67.0
    tf32 = observe(model=replace(FP32_H100, tf32_matmul=True), workload=transformer)
    assert efficiency(tf32).precision == "tf32"
    bf16 = observe(model=BF16_H100, workload=transformer)
    assert efficiency(bf16).precision == "bf16"


def test_the_measured_matmul_peak_is_shown_beside_the_datasheet_at_its_precision() -> None:
    w = Workload(analytic_flops=10**12, peak_tflops=712.0, peak_precision="bf16")
    e = efficiency(observe(workload=w))
    assert e.measured_peak_tflops == 712.0
    assert any("datasheet 989.5" in n and "measured matmul 712" in n for n in e.notes())
    other = efficiency(observe(workload=replace(w, peak_precision="fp32")))
    assert other.measured_peak_tflops is None  # another precision's peak is not this one's


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"workload": Workload(analytic_flops=10**12, fp8_matmuls=96)}, "fp8"),
        ({"gpu_name": "NVIDIA B300"}, "no datasheet peak for NVIDIA B300 in bf16"),
        ({"flops_per_step": 2e14}, "cannot be"),  # 2000 TFLOP/s on an H100
        ({"model": replace(BF16_H100, cuda=False)}, "the job runs on the CPU"),
        ({"flops_per_step": None}, "not counted yet"),
    ],
)
def test_mfu_is_na_with_its_reason_never_a_wrong_number(changes: dict, reason: str) -> None:
    o = observe(**{"flops_per_step": 1e12, **changes})
    e = efficiency(o)
    assert e.mfu_pct is None and reason in (e.reason or "")


def test_kernels_are_split_into_matrix_math_and_the_rest() -> None:
    def event(name: str, ns: int, device: str = "DeviceType.CUDA") -> SimpleNamespace:
        return SimpleNamespace(
            name=lambda: name, duration_ns=lambda: ns, device_type=lambda: device
        )

    events = [
        event("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128", 600),
        event("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", 100),
        event("void at::native::vectorized_layer_norm_kernel<float>", 200),
        event("void at::native::elementwise_kernel<128, 2>", 100),
        event("Memcpy HtoD (Pageable -> Device)", 5000),
        event("aten::mm", 900, "DeviceType.CPU"),
    ]
    facts = kernel_facts(events)
    assert facts["kernels"] == 4 and facts["non_math_pct"] == 30.0
    assert facts["top_non_math"][0].startswith("void at::native::vectorized_layer_norm")


# -- in the hook --------------------------------------------------------------------------


def train_hooked(agent: object, steps: int, checkpointing: bool = False) -> None:
    """A tiny GPT stepped ``steps`` times, each backward and step reported to ``agent`` as the
    hook's wrappers would (no socket: the agent is marked active)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny())
    model.checkpointing = checkpointing
    optimizer = torch.optim.AdamW(model.parameters())
    agent.active = True  # type: ignore[attr-defined]
    for _ in range(steps):
        x = torch.randint(model.config.vocab, (2, model.config.block))
        loss = model(x, x.roll(-1, dims=1))
        agent.on_backward(loss)  # type: ignore[attr-defined]
        loss.backward()
        agent.on_backward_end()  # type: ignore[attr-defined]
        optimizer.step()
        optimizer.zero_grad()
        agent.on_optimizer_step(optimizer)  # type: ignore[attr-defined]


def published(agent: object, kind: str) -> list[dict]:
    """The facts of ``kind`` the agent has waiting for the listener, as their fields."""
    pending = agent._outbox._facts  # type: ignore[attr-defined]
    return [frame.fields() for frame in pending if kind == frame.TYPE]


def test_the_hook_publishes_the_census_once_on_its_step() -> None:
    from gputop_train.hook.agent import Agent

    agent = Agent(torch)
    train_hooked(agent, 5)
    (workload,) = published(agent, "workload")  # no CUDA: no profile, no matmul peak
    assert workload["step"] == 3 and workload["census"]["analytic_flops"] > 0
    assert workload["census"]["matmul_precision"] == "fp32"
    assert workload["profile"] is None and workload["peak"] is None
    (flops,) = published(agent, "flops")
    assert flops["flops"] == pytest.approx(workload["census"]["analytic_flops"], rel=0.15)


def test_activation_checkpointing_adds_no_model_flops() -> None:
    # The checkpointed blocks' attention runs again in the backward: hardware work, not the
    # model's (the H100's GPT ladder read 13% more TFLOP/s a sequence on its checkpointing
    # rung, 2026-11-25, README).
    from gputop_train.hook.agent import Agent

    census = {}
    for checkpointing in (False, True):
        agent = Agent(torch)
        train_hooked(agent, 5, checkpointing=checkpointing)
        (workload,) = published(agent, "workload")
        census[checkpointing] = workload["census"]
    assert census[True]["analytic_flops"] == census[False]["analytic_flops"]
    assert census[True]["fused_attention"] + census[True]["manual_attention"] == (
        census[False]["fused_attention"] + census[False]["manual_attention"]
    )
    assert census[True]["ops"] > census[False]["ops"]  # the recomputation's kernels are real


def test_a_failing_workload_probe_stops_alone_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputop_train.hook import agent as agent_module
    from gputop_train.hook import workload_probes

    class Broken(Census):
        def start(self) -> None:
            raise RuntimeError("no dispatch modes here")

    monkeypatch.setattr(workload_probes, "Census", Broken)
    agent = agent_module.Agent(torch)
    train_hooked(agent, 5)
    assert agent.enabled and agent._step == 5  # the hook and the training went on
    assert published(agent, "workload") == [] and published(agent, "flops")
    assert any("workload probes" in notice for notice in agent._outbox.notices)


def test_a_compiled_model_is_counted_eagerly_and_stays_compiled() -> None:
    """The counted step of a compiled model runs eagerly under set_stance("force_eager"):
    counted in full, and compiled code runs again after it, with no recompilation."""
    from gputop_train.hook.probes import FlopCounter, force_eager

    calls = {"compiled": 0}

    def backend(graph: torch.fx.GraphModule, inputs: list) -> object:
        def run(*args: object) -> object:
            calls["compiled"] += 1
            return graph.forward(*args)

        return run

    import torch._dynamo.utils as dynamo_utils

    graphs = dynamo_utils.counters["stats"]["unique_graphs"]
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8))
    compiled = torch.compile(net, backend=backend)
    x = torch.randn(4, 8)
    compiled(x)
    restore = force_eager(torch)
    assert restore is not None
    counter = FlopCounter()
    counter.start()
    compiled(x)
    flops = counter.stop()
    restore()
    assert flops == 2 * (2 * 4 * 8 * 8) and calls["compiled"] == 1  # eager, counted
    compiled(x)
    assert calls["compiled"] == 2  # compiled again
    assert dynamo_utils.counters["stats"]["unique_graphs"] == graphs + 1  # not recompiled


# -- a run whose batch and precision change between phases --------------------------------


def two_phase_session() -> Session:
    """A minute at 10 samples per 100 ms step, then, after ``batch_size=40``, a minute at 40
    samples per 200 ms step; FLOPs counted once, on a step of the first phase."""
    from gputop_train import events
    from gputop_train.session.model import Session
    from gputop_train.wire import STEP_FIELDS
    from tests.support.clock import ManualClock

    start, pid = 1_800_000_000.0, 4242
    clock = ManualClock(start + 1.0)
    session = Session(command=("python", "train.py"), clock=clock, started_at=start)
    session.apply(events.ProcessHello.of(pid, {"rank": None, "argv": ["train.py"]}))
    knob = {"name": "batch_size", "kind": "int", "value": 10, "min": 1, "max": 64}
    session.apply(events.KnobsDeclared(pid, (knob,)))
    session.apply(
        events.FactSeen.of(pid, {"type": "flops", "step": 3, "flops": 10**12, "samples": 10})
    )
    rows, t = [], start
    for step in range(1, 1201):
        second = step > 600
        t += 0.2 if second else 0.1
        row = [step, t, 200.0 if second else 100.0, None, 40 if second else 10, 1]
        rows.append(row + [None] * (len(STEP_FIELDS) - len(row)))
    session.apply(events.StepRows(pid, tuple(rows[:600])))
    session.apply(events.KnobOutcome(pid, "batch_size", 40, ok=True, previous=10, step=600, t=t))
    session.apply(events.StepRows(pid, tuple(rows[600:])))
    clock.now = t + 1.0
    return session


def test_a_summary_pairs_its_tflops_with_its_own_samples_per_second() -> None:
    from gputop_train.record.summary import markdown, summarize

    summary = summarize(two_phase_session(), {"host": "box"})
    per_sample = 10**12 / 10
    whole = summary["figures"]["samples_per_s"]
    assert 100.0 < whole < 200.0  # 100 samples/s, then 200
    assert summary["achieved_tflops"] == pytest.approx(per_sample * whole / 1e12, rel=0.01)
    by_phase = {p["phase"]: p for p in summary["phases"]}
    assert by_phase[1]["achieved_tflops"] == pytest.approx(10.0, rel=0.05)
    assert by_phase[2]["achieved_tflops"] == pytest.approx(20.0, rel=0.05)
    # The advisor judged the last phase, and the findings' heading says so.
    assert "## Findings (phase 2, the last, warm-up excluded)" in markdown(summary)


def test_one_mfu_over_phases_of_different_precisions_is_na_with_the_reason() -> None:
    fp32 = efficiency(observe(model=FP32_H100, flops_per_step=1.0e12))
    bf16 = efficiency(observe(model=BF16_H100, flops_per_step=1.0e12))
    whole = efficiency(observe(flops_per_step=1.0e12))
    assert whole.mfu_pct is not None
    mixed = mfu.over_phases(whole, [fp32, bf16])
    assert mixed.mfu_pct is None and mixed.achieved_tflops == whole.achieved_tflops
    assert mixed.reason is not None and "fp32, bf16" in mixed.reason
    assert mfu.over_phases(whole, [bf16, bf16]) == whole


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_a_sharded_model_counts_the_full_models_flops(tied: bool) -> None:
    """FSDP2's parameters are DTensors (no data pointer of their own, a shard each): the
    count is the full model's, as the same model's unsharded (issue 37)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        gpt = GPT(GPTConfig.tiny())
        gpt.set_attention("sdpa")
        if not tied:
            gpt.head.weight = torch.nn.Parameter(gpt.wte.weight.detach().clone())
        return gpt

    plain = census_of_step(model(), micro_batches=1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        sharded = model()
        for block in sharded.blocks:
            fully_shard(block)
        fully_shard(sharded)
        facts = census_of_step(sharded, micro_batches=1)
    finally:
        dist.destroy_process_group()
    assert facts["params"] == plain["params"]
    assert facts["analytic_flops"] == pytest.approx(plain["analytic_flops"], rel=0.01)
