"""The monitor yields under autogroup scheduling without touching the job: it lowers its
session's autogroup only when the job is not in it, a guard gives the session its priority
back on any exit (SIGKILL included), and only the last monitor of a session does (issues 31
point 2, 39)."""

from __future__ import annotations

import json
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


# A "monitor": yields to the job whose PID is its argument, says what it did, then waits for a
# line on stdin (or a SIGKILL) and exits.
MONITOR = """
import os, sys
from gputop_train.monitor import priority
problem = priority.yield_to_job(int(sys.argv[1]))
print(problem, os.getpriority(os.PRIO_PROCESS, 0), flush=True)
sys.stdin.readline()
"""

# A "terminal": runs in a session of its own (the test's own session is untouched), starts
# the job in that session (``python train.py &``) or in one of its own (a launched job), runs
# the monitors of SCRIPT in its session, and reports the session's autogroup nice after each
# step as JSON. SCRIPT: "start NAME", "end NAME" (a normal exit), "kill NAME" (SIGKILL).
TERMINAL = """
import json, os, signal, subprocess, sys, time
job_in_session, script = sys.argv[1] == "shared", sys.argv[2:]
sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
job = subprocess.Popen(sleep, start_new_session=not job_in_session)
here = subprocess.Popen(sleep)  # a process of the terminal's session, to read its autogroup

def nice_of(pid):
    return int(open(f"/proc/{pid}/autogroup").read().split("nice")[1])

report, monitors = {"before": nice_of(here.pid), "steps": []}, {}
for step in script:
    action, name = step.split()
    if action == "start":
        monitor = subprocess.Popen(
            [sys.executable, "-c", sys.argv[0], str(job.pid)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        problem, own_nice = monitor.stdout.readline().split()
        monitors[name] = monitor
        report["steps"].append([step, nice_of(here.pid), problem, int(own_nice)])
        continue
    monitor = monitors.pop(name)
    if action == "end":
        monitor.stdin.write("\\n"); monitor.stdin.flush()
    else:
        monitor.send_signal(signal.SIGKILL)
    monitor.wait()
    deadline = time.monotonic() + 15  # a killed monitor's guard restores on its own
    restored = lambda: nice_of(here.pid) == report["before"]
    while action == "kill" and not restored() and time.monotonic() < deadline:
        time.sleep(0.05)
    report["steps"].append([step, nice_of(here.pid), None, None])
report["job"] = nice_of(job.pid)
for process in (job, here):
    process.kill()
print(json.dumps(report))
"""


def _terminal(job: str, *script: str) -> dict[str, object]:
    """Run TERMINAL with the job ``shared`` or ``apart``; its report."""
    code = TERMINAL.replace("sys.argv[0]", repr(MONITOR))
    result = subprocess.run(
        [sys.executable, "-c", code, job, *script], capture_output=True, text=True,
        timeout=120, start_new_session=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


needs_autogroup = pytest.mark.skipif(
    not priority.autogroup_in_effect(), reason="autogroup is not in effect here"
)


@needs_autogroup
def test_a_job_in_the_monitors_session_keeps_its_priority_while_the_monitor_yields() -> None:
    report = _terminal("shared", "start a", "end a")
    steps = report["steps"]
    assert isinstance(steps, list)
    (_, during, problem, own_nice), (_, after, _, _) = steps
    assert problem == "None"
    assert own_nice >= priority.MONITOR_NICENESS  # the monitor's own threads yield
    assert during == after == report["before"]  # the session the job shares is untouched


@needs_autogroup
def test_a_launched_jobs_monitor_lowers_its_session_and_gives_it_back_at_exit() -> None:
    report = _terminal("apart", "start a", "end a")
    steps = report["steps"]
    assert isinstance(steps, list)
    before = report["before"]
    assert isinstance(before, int)
    (_, during, problem, _), (_, after, _, _) = steps
    assert problem == "None"
    assert during >= priority.MONITOR_NICENESS > before
    assert after == before
    assert report["job"] == before  # the job's own session never changed


@needs_autogroup
def test_a_sigkilled_monitors_session_gets_its_priority_back() -> None:
    report = _terminal("apart", "start a", "kill a")
    steps = report["steps"]
    assert isinstance(steps, list)
    assert steps[0][1] >= priority.MONITOR_NICENESS
    assert steps[1][1] == report["before"]


@needs_autogroup
def test_only_the_last_monitor_of_a_session_gives_its_priority_back() -> None:
    report = _terminal("apart", "start a", "start b", "end a", "kill b")
    steps = report["steps"]
    assert isinstance(steps, list)
    lowered = [step[1] for step in steps[:3]]
    assert all(nice >= priority.MONITOR_NICENESS for nice in lowered), steps
    assert steps[3][1] == report["before"]
