"""The suite's own job helpers behave as the real thing they stand in for: a job forked from
the torch server is, to the hook and to the test, a ``python SCRIPT ARGS`` process; a shared
run is made once and read by every test that asks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.job.launched import hook_environment
from tests.support import shared_runs, torch_jobs
from tests.support.paths import REPO
from tests.support.waiting import wait_until

pytest.importorskip("torch")

PROBE = """\
import atexit, json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "marker": os.environ.get("MARKER"),
                  "sid_is_pid": os.getsid(0) == os.getpid(), "path0": sys.path[0],
                  "main": __name__}), flush=True)
atexit.register(lambda: print("atexit ran", flush=True))
mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "raise":
    raise RuntimeError("the script's own error")
if mode == "train":
    import torch
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
if mode == "wait":
    import time
    time.sleep(120)
"""


def probe(tmp_path: Path, *args: str, env: dict[str, str] | None = None, **kwargs: object):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out, err = tmp_path / "out", tmp_path / "err"
    job = torch_jobs.spawn(
        [str(script), *args],
        env={**os.environ, "MARKER": "m1", **(env or {})},
        cwd=tmp_path,
        stdout=out,
        stderr=err,
        **kwargs,  # type: ignore[arg-type]
    )
    return job, out, err


def test_a_forked_job_sees_its_argv_cwd_env_and_runs_as_main(tmp_path: Path) -> None:
    job, out, _ = probe(tmp_path, "exit", "3")
    assert job.wait(timeout=60) == 3
    seen = json.loads(out.read_text().splitlines()[0])
    assert seen["argv"] == [str(tmp_path / "probe.py"), "exit", "3"]
    assert seen["cwd"] == str(tmp_path) and seen["path0"] == str(tmp_path)
    assert seen["marker"] == "m1" and seen["main"] == "__main__"
    assert not seen["sid_is_pid"]  # in its parent's session unless asked
    assert out.read_text().splitlines()[-1] == "atexit ran"  # the interpreter's exit, in full


def test_an_uncaught_error_exits_1_with_its_traceback_on_stderr(tmp_path: Path) -> None:
    job, _, err = probe(tmp_path, "raise")
    assert job.wait(timeout=60) == 1
    assert "RuntimeError: the script's own error" in err.read_text()


def test_a_signal_ends_it_as_a_popen_would_say_and_a_new_session_is_its_own(
    tmp_path: Path,
) -> None:
    job, out, _ = probe(tmp_path, "wait", new_session=True)
    wait_until(lambda: out.exists() and out.read_text(), 60, "the probe's first line")
    assert json.loads(out.read_text().splitlines()[0])["sid_is_pid"]
    assert job.poll() is None
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=60) == -signal.SIGTERM


def test_the_launchers_environment_arms_the_hook_and_it_says_goodbye(tmp_path: Path) -> None:
    job, _, err = probe(tmp_path, "train", env=hook_environment(os.environ))
    socket = wire.socket_path(job.pid, wire.runtime_dir(create=False))
    wait_until(socket.exists, 60, "the hook's socket")  # armed by the product's boot file
    assert job.wait(timeout=60) == 0, err.read_text()
    assert not socket.exists()  # its exit handler closed it


def test_no_forked_job_outlives_the_test_process_that_asked_for_it(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    # The asker's server preloads nothing: its job only sleeps, and the server's torch import
    # (15 s of the asker's 16 s at load ~6.7, 2026-11-27) outlasted the test's 120 s at load
    # 6-7 beside the parallel suite; beside two CPU hogs (load ~7.5) the asker takes 0.6 s
    # without it, 8 s with. What happens at the asker's exit is the same.
    asker = (
        "import os, sys\n"
        "from tests.support import torch_jobs\n"
        "os.environ[torch_jobs.PRELOAD_ENV] = ''\n"
        "job = torch_jobs.spawn([sys.argv[1], 'wait'], env=dict(os.environ))\n"
        "print(job.pid, flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", asker, str(script)], capture_output=True, text=True, cwd=REPO,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pid = int(result.stdout.split()[0])
    wait_until(lambda: not wire.process_exists(pid), 30, "the orphaned job's end")


def test_a_shared_run_is_made_once_and_a_failed_one_again(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    made: list[Path] = []

    def make(folder: Path) -> dict[str, int]:
        made.append(folder)
        if len(made) == 1:
            raise RuntimeError("the first try fails")
        return {"answer": 42}

    key = ("a run for", os.getpid())
    with pytest.raises(RuntimeError):
        shared_runs.once(tmp_path_factory, key, make)
    first, folder = shared_runs.once(tmp_path_factory, key, make)
    again, _ = shared_runs.once(tmp_path_factory, key, make)
    assert first == again == {"answer": 42} and len(made) == 2 and made[-1] == folder
