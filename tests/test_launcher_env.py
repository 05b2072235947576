"""Stale GPUTOP_TRAIN_* variables from the user's shell are never applied (issue 39).

A GPUTOP_TRAIN_SCHEDULE left in a shell was passed to the job (a stale one applied a change
nobody asked for; a garbage one disabled the hook). The launcher sets or clears every
variable it owns; the hook takes a schedule only from a launcher that is its ancestor, and a
garbage one is said and ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook import agent as agent_module
from gputop_train.job.launched import PACKAGE_ROOT, hook_environment
from tests.support.hooked import run_hooked

STALE = {
    wire.SCHEDULE_ENV: json.dumps([{"step": 2, "set": {"step_ms": 50}}]),
    wire.AUTOPILOT_ENV: "1",
    wire.HOOK_ENV: "0",
    wire.PKG_ROOT_ENV: "/nowhere",
    wire.MONITOR_PID_ENV: "1",
}


def test_the_launcher_sets_or_clears_every_variable_it_owns(private_runtime_dir: Path) -> None:
    env = hook_environment({**STALE, "HOME": "/home/me", wire.RUNTIME_DIR_ENV: "/tmp/x"})
    assert wire.SCHEDULE_ENV not in env and wire.AUTOPILOT_ENV not in env
    assert env[wire.HOOK_ENV] == "1" and env[wire.PKG_ROOT_ENV] == str(PACKAGE_ROOT)
    assert env[wire.MONITOR_PID_ENV] == str(os.getpid())
    assert env["HOME"] == "/home/me"
    scheduled = hook_environment(STALE, schedule=[(5, {"n": "2"})], autopilot=True)
    assert json.loads(scheduled[wire.SCHEDULE_ENV]) == [{"step": 5, "set": {"n": "2"}}]
    assert scheduled[wire.AUTOPILOT_ENV] == "1"


def test_only_an_ancestor_counts_as_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(wire.MONITOR_PID_ENV, str(os.getppid()))
    assert agent_module.launcher_pid() == os.getppid()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:  # alive, ours, but not an ancestor: a value left from another run
            monkeypatch.setenv(wire.MONITOR_PID_ENV, str(other.pid))
            assert agent_module.launcher_pid() is None
        finally:
            other.kill()
    code = f"import os; os.environ[{wire.MONITOR_PID_ENV!r}] = '{os.getpid()}'; "
    code += "from gputop_train.hook.agent import launcher_pid; print(launcher_pid())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.stdout.strip() == str(os.getpid()), child.stderr


@pytest.fixture
def torch_agent() -> Iterator[type[agent_module.Agent]]:
    pytest.importorskip("torch")
    yield agent_module.Agent


def test_a_schedule_no_launcher_of_this_job_passed_is_said_and_ignored(
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    torch_agent: type[agent_module.Agent],
) -> None:
    import torch

    monkeypatch.setenv(wire.SCHEDULE_ENV, STALE[wire.SCHEDULE_ENV])
    monkeypatch.setenv(wire.MONITOR_PID_ENV, "1")
    agent = torch_agent(torch)
    assert agent.board.schedule == [] and agent.enabled
    said = f"{wire.SCHEDULE_ENV} ignored: no gputop-train launcher of this job passed it"
    assert said in capfd.readouterr().err and said in agent._outbox.notices[-1]
    monkeypatch.setenv(wire.MONITOR_PID_ENV, str(os.getppid()))
    assert torch_agent(torch).board.schedule == [(2, {"step_ms": 50})]


def test_a_garbage_schedule_never_disables_the_hook(tmp_path: Path) -> None:
    run = run_hooked(
        "sleepy", "steps=12", "step_ms=1",
        extra_env={wire.SCHEDULE_ENV: "{not json"}, tmp_path=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{wire.SCHEDULE_ENV} ignored: not a schedule" in run.stderr
    assert len(run.steps) == 12
