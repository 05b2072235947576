"""Run a scenario under the real hook and collect what a monitor would see."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from gputop_train.job.launched import hook_environment
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session
from gputop_train.session.steps import Step

from . import torch_jobs
from .paths import SCENARIOS


@dataclass
class HookedRun:
    returncode: int
    stdout: str
    stderr: str
    session: Session

    @property
    def steps(self) -> list[Step]:
        return self.session.steps()


def run_hooked(
    scenario: str,
    *params: str,
    connect_after_s: float = 0.0,
    timeout_s: float = 90.0,
    extra_env: dict[str, str] | None = None,
    tmp_path: Path,
    script: Path = SCENARIOS,
) -> HookedRun:
    """Run tests/scenarios/loops.py (or ``script``) SCENARIO under the launcher's
    environment, forked from the torch server (torch_jobs), and read it as a monitor."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    for path in (out, err):  # a second run in one test starts afresh
        path.write_text("")
    job = torch_jobs.spawn(
        [str(script), scenario, *params],
        env={**hook_environment(os.environ), **(extra_env or {})},
        stdout=out,
        stderr=err,
    )
    session = Session()
    client = HookClient(session, lambda: {job.pid})
    started = time.monotonic()
    while job.poll() is None:
        if time.monotonic() - started > timeout_s:
            job.kill()
            raise AssertionError(f"scenario {scenario} did not finish in {timeout_s}s")
        if time.monotonic() - started >= connect_after_s:
            client.poll(0.05)
        else:
            time.sleep(0.05)
    deadline = time.monotonic() + 2.0
    while client.connected_pids and time.monotonic() < deadline:
        client.poll(0.05)
    client.close()
    return HookedRun(job.wait(), out.read_text(), err.read_text(), session)


def hooked_child(monitor_pid: int, timeout_s: float = 60.0) -> int:
    """The PID of the hooked job under ``monitor_pid``, once its socket exists."""
    import psutil

    from gputop_train import wire

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(monitor_pid).children(recursive=True):
            if wire.socket_path(child.pid, wire.runtime_dir(create=False)).exists():
                return child.pid
        time.sleep(0.2)
    raise AssertionError("the job never opened its socket")
