"""Issue 29's small inconsistencies: N/A before a figure exists, the PID a replay shows, an
attach's steps paired with its own time, no "N/A GiB" nor a dangling "none —" in the
summary, and a py-spy refusal blamed on what refused it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.collect import stacks
from gputop_train.collect.fake import FakeProcess, FakePsutil
from gputop_train.collect.procs import ProcessSampler
from gputop_train.headless import status_line, summary_text
from gputop_train.record.summary import markdown, summarize
from gputop_train.session.model import Session
from gputop_train.tui.panels.text import header
from gputop_train.views import steps_text, view_of
from tests.support.sessions import JOB_PID, scripted_session


def test_a_process_cpu_is_na_until_a_whole_period_was_measured() -> None:
    busy = FakeProcess(JOB_PID, 1, "python3", cpu=97.0)
    sampler = ProcessSampler(JOB_PID, lambda: {JOB_PID}, FakePsutil([busy]))
    first = sampler.sample()
    assert first[0].cpu_pct is None  # psutil's first delta spans no time: not 0%
    session = Session(command=("train.py",))
    session.apply(events.ProcsSampled(first, 40.0))
    assert "main N/A CPU" in status_line(view_of(session.snapshot()))
    assert sampler.sample()[0].cpu_pct == 97.0


def test_a_replay_shows_the_recorded_pid_not_na() -> None:
    snap = scripted_session().snapshot()
    line = header(snap, None, paused=False).plain
    assert f"PID {JOB_PID}" in line and "PID N/A" not in line
    assert "PID N/A" in header(Session().snapshot(), None, False).plain


def step_row(step: int, t: float) -> list:
    return [step, t, 100.0, 10.0, 32, 1, None, None, None, None]


def test_an_attach_pairs_the_steps_since_it_with_its_own_time() -> None:
    session = Session(command=("train.py",), clock=lambda: 1000.0, started_at=990.0)
    session.apply(events.ProcessHello.of(JOB_PID, {"rank": None}))
    backlog = [step_row(s, 980.0 + s * 0.01) for s in range(400, 500)]  # before the attach
    since = [step_row(s, 990.0 + (s - 499) * 0.1) for s in range(500, 580)]
    session.apply(events.StepRows(JOB_PID, tuple(backlog + since)))
    snap = session.snapshot(with_phases=True)
    assert snap.total_steps == 579 and snap.steps_before_start == 499
    text = summary_text(view_of(snap))
    # Steps and samples both since the attach (the ring's 100 steps before it are not
    # counted in either), the job's own step numbers beside them (issue 39).
    assert "80 steps and 2,560 samples since the attach (the job's steps 500-579)" in text
    assert snap.total_samples == 80 * 32
    summary = summarize(session, {"host": "box"})
    assert "80 steps and 2,560 samples since the attach" in markdown(summary)
    assert steps_text(40, 0, 1280) == "40 steps, 1,280 samples"  # a launched job: all ours


def test_the_summary_says_na_alone_and_why_there_is_no_finding() -> None:
    session = Session(command=("train.py",))
    text = markdown(summarize(session, {"host": "box"}))
    assert "N/A GiB" not in text and "N/A W" not in text and "N/A J" not in text
    assert "GPU memory peak N/A" in text
    assert "**none** —" not in text and "- none: " in text


def test_a_protected_process_is_not_blamed_on_a_sandbox_without_ptrace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    read_capabilities = stacks.may_trace_others
    monkeypatch.setattr(stacks.os, "geteuid", lambda: 0)
    sampler = stacks.StackSampler(1)
    denied = "Error: Failed to get process executable name\nPermission denied (os error 13)"
    monkeypatch.setattr(stacks, "may_trace_others", lambda: True)
    allowed = sampler._explain(denied)
    assert "though this monitor may trace processes" in allowed and "PID 1" in allowed
    assert "withholds ptrace" not in allowed
    monkeypatch.setattr(stacks, "may_trace_others", lambda: False)
    assert "withholds ptrace" in sampler._explain(denied)
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t000001fffeffffff\n")
    assert read_capabilities(str(status))
    status.write_text("Name:\tx\nCapEff:\t00000000a80425fb\n")  # Docker's default set
    assert not read_capabilities(str(status))


def test_the_gpu_clocks_data_part_is_not_read_as_the_dataloaders_wait() -> None:
    """Issue 39: "data 91% (DataLoader)" beside "data-wait 0%". On the GPU's clock the data
    part is the GPU's gap before its forward; the DataLoader's wait is data-wait."""
    from gputop_train.session.breakdown import StepParts
    from gputop_train.views import breakdown_text

    shares: dict[str, float | None] = {
        "data": 91.0, "forward": 4.0, "backward": 3.0, "optimizer": 1.0, "rest": 1.0
    }  # fmt: skip
    ms = {name: share for name, share in shares.items()}
    gpu = StepParts("gpu", "DataLoader", 10, shares, ms, 100.0)
    text = breakdown_text(gpu, None)
    assert "data 91%" in text and "the GPU's gap before forward" in text
    assert "DataLoader" not in text
    host = StepParts("host", "DataLoader", 10, shares, ms, 100.0)
    assert "(host clock, data: DataLoader)" in breakdown_text(host, None)
