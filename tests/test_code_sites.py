"""The hook names the script's own lines where an edit goes: where it constructs its
DataLoader and where it calls its hand-written attention, carried from the hook through the
session into the findings' evidence and the autopilot's edits left (issue 38, "a ledger a
person can act on")."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.advise import rules
from gputop_train.advise.rules.window import site_evidence
from gputop_train.autopilot.ledger import edit_of
from gputop_train.session.workload import Workload
from gputop_train.views import ledger_lines
from tests.support.hooked import HookedRun, run_hooked
from tests.support.observations import BF16_H100, IMAGENET_4_WORKERS, observe

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).parent / "scenarios" / "code_sites.py"
# An eager GPT that writes its own attention and spends 70% of its kernels' time outside
# GEMMs (tests/test_transformer_rules.py's case that headlines model.sdpa).
MANUAL_GPT = Workload(
    ops=2100, manual_attention=12, tokens=32768, kernels=1900, kernel_ms=95.0, non_math_pct=70.0
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> HookedRun:
    # 12 steps of 400 ms: 2.8 s past the warm-up, enough for the advisor's window.
    hooked = run_hooked("12", "400", script=SCRIPT, tmp_path=tmp_path_factory.mktemp("sites"))
    assert hooked.returncode == 0, hooked.stderr
    return hooked


def marked(run: HookedRun, tag: str) -> str:
    """The line the script marks with ``# <- tag``, as a finding names it."""
    lines = json.loads(run.stdout.split("SITES ", 1)[1])
    return f"code_sites.py:{lines[tag]}"


def test_the_loader_fact_says_where_the_script_constructed_the_dataloader(run: HookedRun) -> None:
    (fact, *_) = run.session.facts(wire.Loader)
    site = fact.constructed_at
    assert site is not None
    assert site["file"] == str(SCRIPT) and f"code_sites.py:{site['line']}" == marked(run, "loader")
    assert site["op"].startswith("return DataLoader(data, batch_size=4")


def test_the_census_says_where_the_hand_written_attention_is_called(run: HookedRun) -> None:
    (workload,) = [f for f in run.session.facts(wire.Workload) if f.census]
    census = workload.census
    assert census is not None
    assert census["manual_attention"] == 1
    site = census.get("attention_at")
    assert site is not None
    assert site["file"] == str(SCRIPT) and f"code_sites.py:{site['line']}" == marked(
        run, "attention"
    )
    assert site["op"].startswith("weights = F.softmax(scores, dim=-1)")


def test_the_sdpa_finding_and_its_edit_name_the_attention_line(run: HookedRun) -> None:
    seen = Workload.from_frame(run.session.facts(wire.Workload)[-1])
    assert seen.attention_at is not None
    # The CPU run's own window has no GPU to be busy: the GPU figures are the rule tests'.
    o = observe(
        model=replace(BF16_H100, compiled=False),
        workload=replace(MANUAL_GPT, attention_at=seen.attention_at),
    )
    sdpa = next(f for f in rules.findings(o) if f.id == "model.sdpa")
    code = "weights = F.softmax(scores, dim=-1)  # <- attention"
    line = f"{marked(run, 'attention')} {code} (the first softmax over (B, H, T, T) scores, hook)"
    assert line in sdpa.evidence
    edit = edit_of(sdpa)
    assert edit.lines == (line,)
    ledger = ledger_lines({"mode": "autopilot", "edits_left": [asdict(edit)]})
    assert ledger == [f"edit left: model.sdpa ({sdpa.expected_gain}): {sdpa.action} [{line}]"]


# Each change below makes tests/support/observations.py's input-bound ImageNet-style loader
# one of the input edits.
INPUT_EDITS: dict[str, dict[str, Any]] = {
    "input.gpu_preprocessing": {"workers": 16, "worker_cpu_pct": 82.0, "system_cpu_pct": 87.0},
    "input.cpu_bound": {"workers": 16, "system_cpu_pct": 98.0, "batch_shape": (256, 512)},
    "input.main_process": {"workers": 8, "worker_cpu_pct": 35.0, "main_cpu_pct": 104.0},
}


@pytest.mark.parametrize("finding_id", sorted(INPUT_EDITS))
def test_the_input_edits_name_the_dataloaders_construction(run: HookedRun, finding_id: str) -> None:
    snapshot = run.session.snapshot(600.0)
    assert snapshot.observation is not None, snapshot.advice_wait
    site = snapshot.observation.loader_site  # the session's observation of the CPU run
    assert site is not None and f"code_sites.py:{site['line']}" == marked(run, "loader")
    # The CPU run's own window is not input-bound on a GPU: the figures are the rule tests'.
    o = observe(**{**IMAGENET_4_WORKERS, **INPUT_EDITS[finding_id]}, loader_site=site)
    finding = next(f for f in rules.findings(o) if f.id == finding_id)
    expected = f"{marked(run, 'loader')} {site['op']} (the DataLoader's construction, hook)"
    assert edit_of(finding).lines == (expected,)


def test_a_site_of_the_wrong_shape_refuses_its_frame_saying_which_key() -> None:
    census = {"manual_attention": 1, "attention_at": {"file": "a.py", "line": "12", "op": ""}}
    raw = {"type": "workload", "step": 3, "census": census}
    with pytest.raises(TypeError, match=r"^census\.attention_at\.line must be int, not '12'$"):
        wire.Workload.decode(raw)
    assert wire.decode_frame(raw) is None  # counted as dropped, as any malformed frame
    good: wire.CodeSite = {"file": "/x/a.py", "line": 12, "op": ""}
    assert Workload.from_frame(wire.Workload(census={"attention_at": good})).attention_at == good
    assert site_evidence(good, "the DataLoader's construction") == (
        "a.py:12 the DataLoader's construction (hook)",
    )


def test_a_loader_the_hooks_own_knob_builds_has_no_line_of_the_script() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    from gputop_train.hook import code_sites, loader_handover
    from tests.support.agents import hooked_agent

    agent = hooked_agent()
    next(agent)
    try:
        users = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2)  # <- here
        site = code_sites.loader_site(users)
        assert site is not None and site["op"].endswith("# <- here")
        settings = {"num_workers": 0, "pin_memory": False, "prefetch_factor": None}
        rebuilt = loader_handover._loader_for(
            torch.utils.data, users, [[0, 1]], {**settings, "persistent_workers": False}
        )
        assert code_sites.loader_site(rebuilt) is None  # gputop-train's line is no edit
    finally:
        next(agent, None)
