"""A job we start: the user's command under the hook, in its own session so it outlives the
monitor."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .. import wire

BOOT_DIR = Path(__file__).resolve().parent.parent / "hook" / "boot"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


class LaunchError(RuntimeError):
    """The command could not be started; the message says what to do."""


def build_command(target: Sequence[str], raw_command: bool) -> list[str]:
    """``SCRIPT ARGS`` runs with this interpreter; after ``--`` the command runs as given."""
    if not target:
        raise LaunchError("nothing to run: give a script (gputop-train train.py) or -- COMMAND")
    if raw_command:
        return list(target)
    script = Path(target[0])
    if not script.is_file():
        raise LaunchError(
            f"no such script: {target[0]}. To run a program rather than a Python script, "
            f"put it after --, e.g. gputop-train -- torchrun --nproc-per-node 2 train.py"
        )
    return [sys.executable, str(script), *target[1:]]


def hook_environment(
    base: Mapping[str, str], schedule: Sequence[tuple[int, dict[str, str]]] = ()
) -> dict[str, str]:
    """The job's environment: the boot dir first on PYTHONPATH, where to find us, a schedule."""
    env = dict(base)
    if schedule:
        entries = [{"step": step, "set": settings} for step, settings in schedule]
        env[wire.SCHEDULE_ENV] = json.dumps(entries)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOT_DIR) + (os.pathsep + existing if existing else "")
    env[wire.HOOK_ENV] = "1"
    env[wire.PKG_ROOT_ENV] = str(PACKAGE_ROOT)
    env[wire.MONITOR_PID_ENV] = str(os.getpid())
    env[wire.RUNTIME_DIR_ENV] = str(wire.runtime_dir(create=True))
    env.setdefault("PYTHONUNBUFFERED", "1")  # the job's output should reach the log live
    return env


def start_job(
    command: Sequence[str],
    stdout: IO[Any] | int | None,
    stderr: IO[Any] | int | None,
    schedule: Sequence[tuple[int, dict[str, str]]] = (),
) -> subprocess.Popen[bytes]:
    """Start the job in a new session: a hang-up of our terminal does not reach it."""
    try:
        env = hook_environment(os.environ, schedule)
    except wire.UnsafeRuntimeDir as error:
        raise LaunchError(f"the hook's socket directory is not private: {error}") from error
    try:
        return subprocess.Popen(
            list(command),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except FileNotFoundError as error:
        raise LaunchError(f"command not found: {command[0]}") from error
    except PermissionError as error:
        raise LaunchError(f"not executable: {command[0]} ({error.strerror})") from error


def signal_job(job: subprocess.Popen[bytes], signum: int) -> None:
    """Deliver a signal to the job's whole process group (ranks and workers too)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signum)


def exit_status(returncode: int) -> int:
    """A shell-style exit status: 128 + N for a job killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


# How long a job gets to finish after Ctrl+C, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = (10.0, 5.0)


def stop_job(job: subprocess.Popen[bytes]) -> None:
    """Ask nicely (SIGINT, as Ctrl+C would), then firmly (SIGTERM), then SIGKILL."""
    for signum, grace_s in zip((signal.SIGINT, signal.SIGTERM), STOP_GRACE_S, strict=True):
        signal_job(job, signum)
        try:
            job.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
    signal_job(job, signal.SIGKILL)
    job.wait()


class LaunchedJob:
    """A command we started: its process group (ranks, workers) is ours to signal, and its
    exit code ours to read. ``attached.AttachedJob`` is the same face on a process found by
    PID."""

    owned = True

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pid = process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> int | None:
        """Block until the job exits; its shell-style exit status."""
        return exit_status(self.process.wait())

    def interrupt(self) -> None:
        """What Ctrl+C in the job's own terminal would do."""
        signal_job(self.process, signal.SIGINT)

    def stop(self) -> None:
        stop_job(self.process)
