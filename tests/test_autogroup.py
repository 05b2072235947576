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
# step as JSON. SCRIPT: "start NAME", "end NAME" (a normal exit), "kill NAME" (SIGKILL),
# "killguard NAME" (SIGKILL of its guard alone), "killall NAME" (SIGKILL of its guard, then of
# it: `kill -9` of every process of ours).
TERMINAL = """
import json, os, signal, subprocess, sys, time
import psutil
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
        env = dict(os.environ)
        if RUNTIME_DIRS:
            env["GPUTOP_TRAIN_RUNTIME_DIR"] = RUNTIME_DIRS[len(monitors) % len(RUNTIME_DIRS)]
        monitor = subprocess.Popen(
            [sys.executable, "-c", sys.argv[0], str(job.pid)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        problem, own_nice = monitor.stdout.readline().split()
        monitors[name] = monitor
        report["steps"].append([step, nice_of(here.pid), problem, int(own_nice)])
        continue
    if action in ("killguard", "killall"):
        guard = psutil.Process(monitors[name].pid).children()[0]
        guard.kill()
        while guard.status() != psutil.STATUS_ZOMBIE:  # the monitor reaps it, or nothing
            time.sleep(0.01)
        if action == "killguard":
            report["steps"].append([step, nice_of(here.pid), None, None])
            continue
        action = "kill"
    monitor = monitors.pop(name)
    if action == "end":
        monitor.stdin.write("\\n"); monitor.stdin.flush()
    else:
        monitor.send_signal(signal.SIGKILL)
    monitor.wait()
    deadline = time.monotonic() + 15  # a killed monitor's guard restores on its own
    restored = lambda: nice_of(here.pid) == report["before"]
    while step.startswith("kill ") and not restored() and time.monotonic() < deadline:
        time.sleep(0.05)
    report["steps"].append([step, nice_of(here.pid), None, None])
report["job"] = nice_of(job.pid)
for process in (job, here):
    process.kill()
print(json.dumps(report))
"""


def _terminal(job: str, *script: str, runtime_dirs: tuple[Path, ...] = ()) -> dict[str, object]:
    """Run TERMINAL with the job ``shared`` or ``apart``, its monitors in turn in each of
    ``runtime_dirs`` (GPUTOP_TRAIN_RUNTIME_DIR) if given; its report."""
    code = TERMINAL.replace("sys.argv[0]", repr(MONITOR))
    code = code.replace("RUNTIME_DIRS", repr([str(d) for d in runtime_dirs]))
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


@needs_autogroup
def test_a_monitor_whose_guard_was_killed_gives_its_session_back_itself() -> None:
    report = _terminal("apart", "start a", "killguard a", "end a")
    steps = report["steps"]
    assert isinstance(steps, list)
    assert steps[1][1] >= priority.MONITOR_NICENESS  # still yielding while it runs
    assert steps[2][1] == report["before"]


@needs_autogroup
def test_a_session_left_lowered_by_kill_9_of_everything_is_given_back_by_the_next_monitor() -> None:
    report = _terminal("apart", "start a", "killall a", "start b", "end b")
    steps = report["steps"]
    assert isinstance(steps, list)
    assert steps[1][1] >= priority.MONITOR_NICENESS  # nothing of ours was left to give it back
    assert steps[2][1] >= priority.MONITOR_NICENESS  # the next monitor yields in its turn
    assert steps[3][1] == report["before"]  # and its exit gives back the session's own nice


@needs_autogroup
def test_monitors_of_one_session_with_their_own_runtime_dirs_give_back_its_own_nice(
    tmp_path: Path,
) -> None:
    """The test suite gives each test its own runtime directory: its monitors left the
    runner's terminal at nice 10 (issue 46), each first guard noting the other's lowering."""
    script = ("start a", "start b", "end a", "end b")
    report = _terminal("apart", *script, runtime_dirs=(tmp_path / "a", tmp_path / "b"))
    steps = report["steps"]
    assert isinstance(steps, list)
    assert steps[3][1] == report["before"]
