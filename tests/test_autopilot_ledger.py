"""The autopilot's ledger reaches each place a person reads it: the Markdown and text
summaries, the summary's JSON and the TUI's Knobs tab (issue 38)."""

from __future__ import annotations

import json

from gputop_train.advise.rules import Change, Finding
from gputop_train.autopilot.pilot import Pilot
from gputop_train.headless import summary_text
from gputop_train.record.summary import markdown, summarize
from gputop_train.tui.panels.knobs import autopilot_text
from gputop_train.views import view_of
from tests.support.simulated_job import SimulatedJob, fly

SDPA = Finding(
    "model.sdpa",
    "Hand-written attention",
    ("gpt.py:88 softmax (x12)",),
    "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
    "up to 1.6x",
    0.85,
    1.6,
)
BF16 = Finding(
    "gpu.mixed_precision", "fp32", (), "bf16", "up to 2.0x", 0.8, 2.0,
    (Change("precision", "bf16"),),
)  # fmt: skip
COMPILE = Finding(
    "gpu.compile", "eager", (), "compile", "up to 1.5x", 0.7, 1.5, (Change("compile", True),)
)


def climbed() -> SimulatedJob:
    """bf16 pays (kept), compile does not (reverted), SDPA needs an edit."""
    job = SimulatedJob(lambda c: 50.0 if c["precision"] == "bf16" else 100.0)
    advise = lambda o: [SDPA, BF16, COMPILE]  # noqa: E731
    pilot = Pilot(job.session, job.request, 10.0, clock=job.clock, advise=advise)
    fly(job, pilot)
    assert pilot.status().done
    return job


def test_the_summaries_and_the_knobs_tab_show_the_ledger() -> None:
    job = climbed()
    summary = summarize(job.session, {"host": "test"})
    text = markdown(summary)
    assert "### Ledger" in text
    assert "- start -> end: 320 -> 640 samples/s (2.00x, both settled)" in text
    kept = "- kept precision=bf16 (from gpu.mixed_precision): predicted 2.00x, settled 2.00x"
    assert kept in text
    assert "- reverted compile=true (phase 3 against phase 2): 1.00x < 1.03x: does not pay" in text
    assert (
        "- edit left: model.sdpa (up to 1.6x): torch.nn.functional.scaled_dot_product_attention"
        "(q, k, v, is_causal=True) [gpt.py:88 softmax (x12)]"
    ) in text
    assert "- replay: `gputop-train --schedule 2:precision=bf16 -- python train.py`" in text
    pilot = json.loads(json.dumps(summary))["figures"]["autopilot"]
    assert pilot["edits_left"][0]["finding"] == "model.sdpa"
    assert pilot["replay"] == "gputop-train --schedule 2:precision=bf16 -- python train.py"
    assert pilot["end_settings"] == ["precision=bf16"]
    view = view_of(job.session.snapshot(10.0, with_phases=True))
    assert "  replay: gputop-train --schedule 2:precision=bf16 -- python train.py" in (
        summary_text(view).splitlines()
    )
    panel = autopilot_text(view).plain
    assert "Ledger" in panel and "edit left: model.sdpa (up to 1.6x)" in panel


def test_a_recordings_garbage_ledger_reads_na_not_a_traceback() -> None:
    from gputop_train.views import ledger_lines

    garbage = {
        "mode": "autopilot",
        "start_samples_per_s": "fast",
        "trials": [7, {"decision": "kept", "gain": "2x", "predicted_gain": None}],
        "edits_left": {"not": "a list"},
    }
    assert ledger_lines(garbage) == ["kept None (from None): predicted N/A, settled N/A"]
    assert ledger_lines({"mode": "try", "trials": []}) == []  # --try has no ledger
