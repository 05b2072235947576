"""The monitor yields under autogroup scheduling too: its session's autogroup is lowered while
it runs and put back when it exits (issue 31 point 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputop_train.monitor import priority


def test_autogroup_is_in_effect_only_when_enabled_and_in_the_root_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enabled, cgroups = tmp_path / "enabled", tmp_path / "cgroup"
    monkeypatch.setattr(priority, "AUTOGROUP_ENABLED", enabled)
    monkeypatch.setattr(priority, "OWN_CGROUPS", cgroups)
    cases = [
        ("1", "0::/\n", True),  # cgroup v2, root
        ("1", "4:memory:/x\n1:cpu,cpuacct:/\n0::/\n", True),  # v1 cpu at root
        ("0", "0::/\n", False),  # autogroup off
        ("1", "0::/user.slice/user-1000.slice/session-3.scope\n", False),  # systemd: nice works
        ("1", "3:cpu,cpuacct:/docker/abc\n", False),
    ]
    for on, lines, expected in cases:
        enabled.write_text(on)
        cgroups.write_text(lines)
        assert priority.autogroup_in_effect() is expected, (on, lines)


# Run in a session of its own (as a terminal's would be): the test's own session is untouched.
# A sleeper shares that session, so its autogroup can be read after the "monitor" exits.
CHILD = """
import os, subprocess, sys
from gputop_train.monitor import priority
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], **quiet)
group = f"/proc/{sleeper.pid}/autogroup"
print(sleeper.pid, open(group).read().split()[-1], flush=True)
print(priority.yield_to_job(os.getpid()), flush=True)
print(open(group).read().split()[-1], flush=True)
"""


@pytest.mark.skipif(not priority.autogroup_in_effect(), reason="autogroup is not in effect here")
def test_the_session_autogroup_is_lowered_while_the_monitor_runs_and_restored_after(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
        start_new_session=True, cwd=tmp_path,
    )  # fmt: skip
    sleeper, before, problem, during = result.stdout.split()
    try:
        assert problem == "None", result.stderr
        assert int(during) >= priority.MONITOR_NICENESS > int(before)
        after = Path(f"/proc/{sleeper}/autogroup").read_text().split()[-1]
        assert after == before  # given back when the monitor exited
    finally:
        subprocess.run(["kill", sleeper], check=False)
