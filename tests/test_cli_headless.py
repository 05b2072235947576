"""gputop-train as a user runs it: headless, on CPU torch, through the real launcher."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import gputop
from tests.support.hooked import hooked_child
from tests.support.paths import REPO, SCENARIOS
from tests.support.torchrun import unslowed_ddp

pytest.importorskip("torch")


def test_json_mode_prints_one_object_per_interval_and_a_summary() -> None:
    result = gputop(
        "--headless",
        "--format",
        "json",
        "--interval",
        "0.5",
        str(SCENARIOS),
        "sleepy",
        "batch_ms=20",
        "step_ms=20",
        "steps=60",
    )
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert objects[-1]["type"] == "summary" and objects[-1]["total_steps"] == 60
    assert objects[-1]["exit_code"] == 0
    live = [o for o in objects if o["type"] == "status" and o["samples_per_s"]]
    assert live, "no interval showed throughput"
    assert all(o["data_wait_pct"] > 0 for o in live)
    assert "scenario sleepy" in result.stderr  # the job's own output goes to stderr


# A pynvml whose library is missing, as on a machine without the NVIDIA driver: put before the
# real one, on every machine, so that the N/A path is tested on GPU boxes too.
NO_DRIVER_PYNVML = """
class NVMLError(Exception):
    pass


def nvmlInit():
    raise NVMLError("NVML Shared Library Not Found")
"""


def test_text_mode_shows_the_status_fields_and_no_gpu_is_na(tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text(NO_DRIVER_PYNVML)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    result = gputop(
        "--headless", str(SCENARIOS), "sleepy", "batch_ms=5", "step_ms=5", "steps=200",
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # One status: its first line (the clock) and the indented lines under it.
    statuses = re.split(r"\n(?=\[)", result.stdout.split("\ngputop-train:")[0])
    line = next(status for status in statuses if "samples/s" in status and "GPU" in status)
    for field in ("steps/s", "step ", "data-wait", "GPU", "CPU"):
        assert field in line
    assert "GPU figures are N/A" in result.stderr and "Shared Library Not Found" in result.stderr
    assert "GPU util N/A" in line or "GPU N/A" in line
    assert "GPU util 0%" not in line


def test_the_jobs_exit_code_is_passed_on(tmp_path: Path) -> None:
    # A script that only exits: what passes the code on is the launcher, whatever the job
    # imports (a torch job cost 4.3 s of CPU to start, for nothing this test reads).
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('training')\nsys.exit(3)\n")
    result = gputop("--headless", str(script))
    assert result.returncode == 3
    assert "job exit code 3" in result.stdout


def test_any_command_runs_after_double_dash() -> None:
    result = gputop(
        "--headless",
        "--",
        "bash",
        "-c",
        f"{sys.executable} {SCENARIOS} sleepy steps=5 batch_ms=0 step_ms=1",
    )
    assert result.returncode == 0, result.stderr
    assert "5 steps" in result.stdout  # the hook reached python below bash


def test_a_missing_script_or_command_says_what_to_do() -> None:
    missing = gputop("--headless", "no_such_train.py")
    assert missing.returncode == 2 and "no such script" in missing.stderr
    assert "--" in missing.stderr  # how to run a program instead
    not_found = gputop("--headless", "--", "no-such-program-xyz")
    assert not_found.returncode == 2 and "command not found" in not_found.stderr


def wait_for_status(monitor: subprocess.Popen[str]) -> None:
    """Until the monitor prints its first status line: it has started, set up its signal
    handling and the job is training (waiting only for the job's socket let a Ctrl+C land
    while the monitor was still importing NVML, on a loaded machine)."""
    assert monitor.stdout is not None
    for line in monitor.stdout:
        if "steps/s" in line:
            return
    raise AssertionError("the monitor ended before its first status line")


def test_ctrl_c_is_forwarded_to_the_job_which_ends_cleanly() -> None:
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", str(SCENARIOS), "forever"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    hooked_child(monitor.pid)  # the job is training ...
    wait_for_status(monitor)  # ... and the monitor is ready for a Ctrl+C
    monitor.send_signal(signal.SIGINT)
    out, err = monitor.communicate(timeout=60)
    assert "job got KeyboardInterrupt" in err
    assert monitor.returncode == 130
    assert "job exit code 130" in out


def test_ctrl_c_reaches_a_job_that_ignores_sigint_as_sigterm() -> None:
    # Started under `trap '' INT` (nohup and some schedulers do the same), the job inherits
    # SIGINT as ignored: forwarding SIGINT alone would do nothing.
    command = f"trap '' INT; exec {sys.executable} {SCENARIOS} forever"
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", "--", "bash", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    hooked_child(monitor.pid)  # the job is training ...
    wait_for_status(monitor)  # ... and the monitor is ready for a Ctrl+C
    monitor.send_signal(signal.SIGINT)
    out, err = monitor.communicate(timeout=60)
    assert "sent SIGTERM to the job" in err
    assert monitor.returncode == 128 + signal.SIGTERM
    assert f"job exit code {128 + signal.SIGTERM}" in out


@pytest.mark.parametrize("flags", [[], ["--no-nice"]], ids=["yields", "no-nice"])
def test_the_monitor_yields_its_cpu_and_io_to_the_job_unless_told_not_to(
    flags: list[str], tmp_path: Path
) -> None:
    import psutil

    # A job that only waits: the priorities are the launcher's doing, whatever the job imports.
    script = tmp_path / "train.py"
    script.write_text("import time\ntime.sleep(120)\n")
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", *flags, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        assert monitor.stdout is not None
        monitor.stdout.readline()  # its first status: its threads, the recorder's too, run
        job = next(
            child
            for child in psutil.Process(monitor.pid).children(recursive=True)
            if str(script) in child.cmdline()
        )
        threads = [t.id for t in psutil.Process(monitor.pid).threads()]
        monitor_nice = {os.getpriority(os.PRIO_PROCESS, tid) for tid in threads}
        job_nice = job.nice()
        if flags:
            assert monitor_nice == {job_nice}
        else:
            assert min(monitor_nice) > job_nice  # every thread, the recorder's too
            assert psutil.Process(monitor.pid).ionice().ioclass == psutil.IOPRIO_CLASS_IDLE
            assert job.ionice().ioclass != psutil.IOPRIO_CLASS_IDLE  # the job keeps its own
    finally:
        monitor.send_signal(signal.SIGINT)
        monitor.communicate(timeout=60)


def test_the_job_has_its_own_session_so_a_hangup_cannot_reach_it() -> None:
    code = "import os,sys; print(os.getsid(0) == os.getpid(), flush=True)"
    result = gputop("--headless", "--", sys.executable, "-c", code)
    assert "True" in result.stderr


def test_a_shadowed_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_RAN'] = '1'\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = "import os; print('shadowed ran:', os.environ.get('SHADOWED_RAN'))"
    result = gputop("--headless", "--", sys.executable, "-c", code, env=env)
    assert "shadowed ran: 1" in result.stderr


def test_the_demo_trains_on_the_cpu_with_throughput_and_data_wait() -> None:
    result = gputop(
        "--headless",
        "--format",
        "json",
        "demos/resnet.py",
        "--steps",
        "6",
        "--image-size",
        "32",
        "--batch-size",
        "4",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["total_steps"] == 6 and summary["total_samples"] == 24
    assert summary["samples_per_s"] > 0
    assert summary["data_wait_pct"] > 0


def test_a_schedule_walks_phases_and_the_summary_has_the_phase_table() -> None:
    result = gputop(
        "--headless",
        "--format",
        "json",
        "--interval",
        "0.5",
        "--schedule",
        "20:step_ms=20,260:step_ms=2",
        str(SCENARIOS),
        "knobbed",
        "steps=2200",
    )
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    phases = objects[-1]["phases"]
    assert [p["change"] for p in phases] == ["start", "step_ms=20", "step_ms=2"]
    assert [p["first_step"] for p in phases] == [1, 21, 261]
    # The status lines walk the phases in order, never back, to the last; which ones they
    # show depends on when the yielding monitor prints and connects: its first line came
    # after phase 1's 0.1 s at load 6-7 on the 2-core box (2026-11-27, it said phase 3), and
    # a monitor that connects late learns the phases from the hook's hello before the rows
    # of their steps (a status said phase 2 at 0 steps beside two CPU hogs).
    walked = [o["phase"] for o in objects]
    assert walked == sorted(walked) and walked[-1] == 3
    # Phase 1 lasts ~0.1 s: all warm-up. Phases 2 and 3 last over 3 s and have figures.
    assert phases[0]["samples_per_s"] is None and phases[0]["warmup_steps"] == 20
    slow, fast = phases[1]["step_ms_p50"], phases[2]["step_ms_p50"]
    assert slow > 20.0 > fast
    assert phases[1]["speedup"] == 1.0 and phases[2]["speedup"] > 1.5


def test_a_malformed_schedule_is_refused_before_anything_runs() -> None:
    result = gputop("--headless", "--schedule", "ten:workers=8", str(SCENARIOS), "sleepy")
    assert result.returncode == 2 and "expected STEP:knob=value" in result.stderr


def test_a_schedule_entry_the_jobs_knobs_refuse_is_said_at_once_with_the_knobs() -> None:
    # Steps 5000 and 6000 never come (300 steps): the notes come from the first steps' knobs.
    result = gputop(
        "--headless", "--interval", "0.5", "--schedule", "5000:nosuchknob=4,6000:step_ms=lots",
        str(SCENARIOS), "knobbed", "steps=300",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "--schedule step 5000: no knob named 'nosuchknob'" in out
    assert "--schedule step 6000: step_ms takes a whole number, not 'lots'" in out
    assert "this job's knobs: step_ms" in out


def test_torchrun_ranks_are_each_hooked_and_their_samples_add_up(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run = unslowed_ddp(tmp_path_factory)  # `gputop-train -- torchrun ...`, two DDP ranks
    events = run.events()
    ranks = {e["frame"]["rank"]: e["pid"] for e in events if e["kind"] == "hello"}
    assert sorted(ranks) == [0, 1]  # no edit to the script, no hook in torchrun itself
    stepped = {e["pid"] for e in events if e["kind"] == "steps" and e["rows"]}
    assert stepped == set(ranks.values())
    summary = run.summary
    assert summary["total_steps"] == 100  # rank 0's optimizer steps, not the sum over ranks
    assert summary["total_samples"] == 2 * 100 * 8  # every rank's samples
    # samples/s counts both ranks: twice one rank's batches per second.
    one_rank = 8 * summary["steps_per_s"]
    assert summary["samples_per_s"] == pytest.approx(2 * one_rank, rel=0.2)
    # Each rank has its own row.
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert all(r["total_steps"] == 100 for r in summary["ranks"])


def test_a_socket_directory_open_to_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    env = {**os.environ, "GPUTOP_TRAIN_RUNTIME_DIR": str(shared)}
    for args in (("--headless", str(SCENARIOS), "sleepy"), ("attach", str(os.getpid()))):
        result = gputop(*args, env=env)
        assert result.returncode == 2, args
        assert f"chmod 700 {shared}" in result.stderr and "Traceback" not in result.stderr
