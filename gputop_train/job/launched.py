"""A job we start: the user's command under the hook, in its own session so it outlives the
monitor."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import wire
from .stop_ladder import climb

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
    base: Mapping[str, str],
    schedule: Sequence[tuple[int, dict[str, str]]] = (),
    autopilot: bool = False,
    recording: Path | None = None,
) -> dict[str, str]:
    """The job's environment: the boot dir first on PYTHONPATH, where to find us, a schedule,
    and whether the autopilot drives it."""
    # Every variable of ours is set or cleared here: one left in the user's shell by another
    # run (a schedule, the autopilot) is never passed on (the runtime dir is the user's own).
    env = {k: v for k, v in base.items() if k not in wire.LAUNCHER_ENV}
    if autopilot:
        env[wire.AUTOPILOT_ENV] = "1"
    if schedule:
        entries = [{"step": step, "set": settings} for step, settings in schedule]
        env[wire.SCHEDULE_ENV] = json.dumps(entries)
    if recording is not None:  # the hook appends its step rows there too (hook/row_log.py)
        env[wire.RECORDING_ENV] = str(recording)
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
    log_fd: int,
    schedule: Sequence[tuple[int, dict[str, str]]] = (),
    autopilot: bool = False,
    recording: Path | None = None,
) -> LaunchedJob:
    """Start the job in a new session (a hang-up of our terminal does not reach it), its
    output through a relay into the log (``log_fd``): the job never writes to anything of the
    monitor's, so neither a lost terminal nor a full disk can fail its writes (job/relay.py)."""
    try:
        env = hook_environment(os.environ, schedule, autopilot, recording)
    except wire.UnsafeRuntimeDir as error:
        raise LaunchError(f"cannot use the hook's socket directory: {error}") from error
    reader, writer = os.pipe()
    try:
        relay = subprocess.Popen(
            [sys.executable, "-m", "gputop_train.job.relay", str(log_fd)],
            stdin=reader,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(log_fd,),
            cwd=PACKAGE_ROOT,  # finds gputop_train as the monitor does, whatever the job's cwd
            start_new_session=True,
        )
        try:
            process = subprocess.Popen(
                list(command),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=writer,
                stderr=writer,
                start_new_session=True,
            )
        except FileNotFoundError as error:
            raise LaunchError(f"command not found: {command[0]}") from error
        except PermissionError as error:
            raise LaunchError(f"not executable: {command[0]} ({error.strerror})") from error
    finally:
        os.close(reader)
        os.close(writer)  # the job (and the relay) hold their ends now
    return LaunchedJob(process, relay)


def signal_job(job: subprocess.Popen[bytes], signum: int) -> None:
    """Deliver a signal to the job's whole process group (ranks and workers too), then
    SIGCONT: a stopped job (SIGSTOP, Ctrl+Z) runs its own handlers rather than waiting for
    SIGKILL (issue 31: a stopped job's "stop" ended in SIGKILL after 15 s)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signum)
        if signum != signal.SIGKILL:
            os.killpg(job.pid, signal.SIGCONT)


def ignores_signal(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has ``signum`` set to SIG_IGN (Linux /proc; False elsewhere)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def exit_status(returncode: int) -> int:
    """A shell-style exit status: 128 + N for a job killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


# How long the job's last output may take to reach the log once the job has exited.
RELAY_DRAIN_S = 5.0
# After a SIGTERM passed on from ours (``timeout``, a scheduler), as torchrun's agent does for
# its workers: 30 s to save and exit, then SIGKILL.
TERMINATE_GRACE_S = 30.0


def stop_job(job: subprocess.Popen[bytes]) -> None:
    """The stop ladder (stop_ladder.py) on the job's whole process group."""

    def ended_within(seconds: float) -> bool:
        try:
            job.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    climb(lambda signum: signal_job(job, signum), ended_within)
    job.wait()


class LaunchedJob:
    """A command we started: its process group (ranks, workers) is ours to signal, and its
    exit code ours to read. ``attached.AttachedJob`` is the same face on a process found by
    PID."""

    owned = True

    def __init__(
        self, process: subprocess.Popen[bytes], relay: subprocess.Popen[bytes] | None = None
    ) -> None:
        self.process = process
        self.relay = relay
        self.pid = process.pid
        self._interrupts = 0
        self._terminating: threading.Timer | None = None

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> int | None:
        """Block until the job exits (and its last output reached the log); its shell-style
        exit status."""
        code = exit_status(self.process.wait())
        if self.relay is not None:  # a child that kept the pipe keeps the relay: not forever
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.relay.wait(timeout=RELAY_DRAIN_S)
        return code

    def interrupt(self) -> str:
        """What Ctrl+C in the job's own terminal would do; pressed again, firmer: SIGTERM,
        then SIGKILL. A job that ignores SIGINT (it inherited SIG_IGN, as under ``nohup`` or
        a shell's ``trap '' INT``) gets SIGTERM at once. Returns what was sent, to show."""
        ladder = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
        if ignores_signal(self.pid, signal.SIGINT):
            ladder.remove(signal.SIGINT)
        signum = ladder[min(self._interrupts, len(ladder) - 1)]
        self._interrupts += 1
        signal_job(self.process, signum)
        return signal.Signals(signum).name

    def stop(self) -> None:
        stop_job(self.process)

    def terminate(self) -> str:
        """Pass on a SIGTERM the monitor got: SIGTERM to the job's group now, SIGKILL after
        TERMINATE_GRACE_S (or at once, asked again). Returns what was sent, to show."""
        if self._terminating is not None:
            self._terminating.cancel()
            signal_job(self.process, signal.SIGKILL)
            return "SIGKILL"
        signal_job(self.process, signal.SIGTERM)
        self._terminating = threading.Timer(TERMINATE_GRACE_S, self._kill_if_running)
        self._terminating.daemon = True
        self._terminating.start()
        return "SIGTERM"

    def _kill_if_running(self) -> None:
        if self.running():
            signal_job(self.process, signal.SIGKILL)
