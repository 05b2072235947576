"""Tokens/s, the step breakdown and the memory audit as every front end shows them: the
headless JSON and text, the summary, Prometheus, the Steps and GPU panels (docs/steps.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from gputop_train import events
from gputop_train.export.prometheus import JobCollector
from gputop_train.headless import status_line, summary_text
from gputop_train.record.summary import markdown, summarize
from gputop_train.samples import GpuSample
from gputop_train.session.model import Session
from gputop_train.tui.panels.text import gpu_panel, steps_panel
from gputop_train.views import status_fields, view_of
from tests.support.clock import ManualClock
from tests.support.metrics import TRAIN

NOW = 1_800_000_000.0
PID = 4242
AUDIT = {
    "type": "memory_audit",
    "step": 3,
    "params_bytes": 500 * 2**20,
    "grads_bytes": 500 * 2**20,
    "optimizer_bytes": 1000 * 2**20,
    "allocated_peak": 6000 * 2**20,
    "reserved_peak": 7000 * 2**20,
    "allocated": 2000 * 2**20,
    "reserved": 7000 * 2**20,
    "alloc_retries": 4,
    "ooms": 0,
    "device_total": 80 * 2**30,
}


def gpt_session(split: bool = True) -> Session:
    """A nanoGPT-style loop's minute: 100 ms steps of 8 x 1024 tokens, no DataLoader."""
    clock = ManualClock(NOW)
    session = Session(command=("python", "train.py"), clock=clock, started_at=NOW - 70.0)
    session.apply(events.ProcessHello.of(PID, {"rank": None, "argv": ["train.py"]}))
    rows, t = [], NOW - 60.0
    for step in range(1, 500):
        t += 0.1
        parts = [10.0, 30.0, 50.0, 8.0, 2.0, "gpu"] if split else [None] * 6
        rows.append(
            [step, t, 100.0, None, 8, 0, 95.0, None, None, None, None, 8 * 1024, 9.0, *parts]
        )
    session.apply(events.StepRows(PID, tuple(rows)))
    fact = {"type": "step_parts", "step": 1, "model": "GPT"}
    if not split:
        fact = {"type": "step_parts", "step": 1, "reason": "the model's forward took no tensor"}
    session.apply(events.FactSeen.of(PID, fact))
    session.apply(events.FactSeen.of(PID, AUDIT))
    session.apply(events.GpuSampled((GpuSample(0, NOW - 1.0, name="H100", util_pct=90.0),)))
    return session


def test_the_headless_json_has_a_field_per_phase_and_the_audit() -> None:
    fields = status_fields(view_of(gpt_session().snapshot(window_s=30.0)))
    assert fields["tokens_per_s"] == 81920.0  # 8192 tokens per 100 ms
    assert fields["samples_per_s"] == 80.0
    assert fields["host_gap_pct"] == 9.0
    parts = fields["step_parts"]
    assert parts["clock"] == "gpu" and parts["data_source"] == "host gap"
    assert (parts["data_pct"], parts["forward_pct"], parts["backward_pct"]) == (10, 30, 50)
    assert (parts["optimizer_pct"], parts["rest_pct"], parts["forward_ms"]) == (8, 2, 30)
    assert fields["timed_model"] == "GPT"
    memory = fields["memory"]
    assert memory["activations_bytes"] == 4000 * 2**20 and memory["alloc_retries"] == 4
    assert memory["cache_bytes"] == 1000 * 2**20


def test_na_comes_with_its_reason_never_zeros() -> None:
    view = view_of(gpt_session(split=False).snapshot(window_s=30.0))
    parts = status_fields(view)["step_parts"]
    assert parts == {"clock": None, "reason": "the model's forward took no tensor"}
    assert "parts N/A: the model's forward took no tensor" in steps_panel(view).plain


def test_text_front_ends_show_tokens_parts_and_memory() -> None:
    session = gpt_session()
    view = view_of(session.snapshot(window_s=30.0))
    line = status_line(view)
    assert "81.9k tokens/s" in line and "data 10% fwd 30% bwd 50% opt 8% rest 2%" in line
    assert "data-wait 9% (host gap)" in line
    panel = steps_panel(view).plain
    assert "tokens/s  81.9k" in panel and "(data: the GPU's gap before forward)" in panel
    assert "d" * 3 + "f" * 9 + "b" * 15 in panel  # the stacked bar, 30 characters
    assert "retries 4" in gpu_panel(view.snap).plain
    summary = " ".join(summary_text(view).split())  # lines wrap at the text width
    assert "step parts: data 10%" in summary and "activations 3.9 GiB" in summary
    text = markdown(summarize(session, {"host": "box"}))
    assert "- step breakdown: data 10% (10.0 ms), forward 30% (30.0 ms)" in text
    assert "4 allocation retries, 0 OOMs" in text
    assert "81.9k tokens/s" in text


def test_prometheus_exports_tokens_parts_and_memory() -> None:
    session = gpt_session()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(lambda: view_of(session.snapshot(window_s=30.0)), TRAIN))
    text = generate_latest(registry).decode()
    assert "gputop_train_job_tokens_per_second" in text
    assert 'part="backward"' in text and 'clock="gpu"' in text
    assert 'kind="activations"' in text
    assert "gputop_train_alloc_retries" in text


def test_a_summary_from_before_these_figures_reads_na() -> None:
    summary = summarize(gpt_session(), {"host": "box"})
    for key in ("tokens_per_s", "step_parts", "memory"):
        del summary["figures"][key]
    text = markdown(summary)
    assert "- step breakdown: N/A" in text and "- tokens N/A" in text
