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
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import psutil

from .. import wire
from . import stop_ladder
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


# How often a stop looks whether the job's processes are gone.
GROUP_POLL_S = 0.1


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` lives (Linux /proc; zombies have ended:
    they wait for their parent to read their status). Where /proc cannot be read, whether
    the group can be signalled."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class JobTree:
    """Every process of the job: its process group, and each descendant ever seen. torchrun
    starts each rank in a session of its own, so a signal to the job's group never reaches
    the ranks, and a rank outlives the agent as an orphan (2 gloo ranks, torch 2.14.1,
    2026-11-27: a rank that heeds no SIGINT was left running after the agent's SIGKILL)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._known: dict[int, psutil.Process] = {}

    def refresh(self) -> None:
        """Remember the job's descendants now (before a signal: once the agent is gone they
        are no longer its children). A process is known with its start time: a PID the
        kernel gives to another process later is not signalled."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.pid).children(recursive=True):
                self._known.setdefault(child.pid, child)

    def signal(self, signum: int) -> None:
        """``signum`` to the job's group and every descendant seen, each followed by SIGCONT
        (a stopped process runs its handlers)."""
        self.refresh()
        targets: list[Callable[[int], None]] = [self._group_send]
        targets += [partial(_send, p) for p in self._known.values()]
        for send in targets:
            send(signum)
            if signum != signal.SIGKILL:
                send(signal.SIGCONT)

    def _group_send(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def alive(self) -> list[int]:
        """The job's processes still running (zombies have ended)."""
        self.refresh()
        left = [p.pid for p in self._known.values() if _running(p)]
        return left if left or not group_alive(self.pid) else [self.pid]


def _send(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_job(
    job: subprocess.Popen[bytes], tree: JobTree, hung: Callable[[], None] | None = None
) -> None:
    """The stop ladder (stop_ladder.py): SIGINT to the job's process group, as Ctrl+C in its
    terminal; SIGTERM and SIGKILL to every process of the job (``tree``)."""
    tree.refresh()
    climb(
        lambda signum: _ladder_send(job, tree, signum), lambda s: _ended_within(job, tree, s), hung
    )
    job.wait()


def _ladder_send(job: subprocess.Popen[bytes], tree: JobTree, signum: int) -> None:
    if signum == signal.SIGINT:
        signal_job(job, signum)
    else:
        tree.signal(signum)


def _ended_within(job: subprocess.Popen[bytes], tree: JobTree, seconds: float) -> bool:
    """Wait up to ``seconds`` for the job and every process of it (its ranks, their workers:
    a rank can outlive torchrun's agent) to be gone."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            job.wait(timeout=GROUP_POLL_S)
        if job.returncode is not None and not tree.alive():
            return True
        if time.monotonic() >= deadline:
            return False


class LaunchedJob:
    """A command we started: its process group (ranks, workers) is ours to signal, and its
    exit code ours to read. ``attached.AttachedJob`` is the same face on a process found by
    PID.

    ``tell`` says a line to the user (set by the CLI: stderr and the session's Log);
    ``where_waiting`` writes the stall dump and returns where each rank waits (the monitor's
    stall watch), for a job that has not exited SIGINT's grace after Ctrl+C."""

    owned = True

    def __init__(
        self, process: subprocess.Popen[bytes], relay: subprocess.Popen[bytes] | None = None
    ) -> None:
        self.process = process
        self.relay = relay
        self.pid = process.pid
        self._interrupts = 0
        self._terminating: threading.Timer | None = None
        self._escalation: threading.Thread | None = None
        self.tree = JobTree(process.pid)
        self.tell: Callable[[str], None] = lambda text: None
        self.where_waiting: Callable[[], str | None] = lambda: None

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> int | None:
        """Block until the job exits (and its last output reached the log); its shell-style
        exit status. After Ctrl+C, until the ladder has ended every process of its group: a
        rank that outlives torchrun's agent is still the job."""
        code = exit_status(self.process.wait())
        if self._escalation is not None:
            self._escalation.join()
        if self.relay is not None:  # a child that kept the pipe keeps the relay: not forever
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.relay.wait(timeout=RELAY_DRAIN_S)
        return code

    def interrupt(self) -> str:
        """What Ctrl+C in the job's own terminal would do; pressed again, firmer: SIGTERM,
        then SIGKILL. A job that ignores SIGINT (it inherited SIG_IGN, as under ``nohup`` or
        a shell's ``trap '' INT``) gets SIGTERM at once. A job still there SIGINT's grace
        after the first is hung: the ladder goes on by itself (``_escalate``). Returns what
        was sent, to show."""
        ladder = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
        if ignores_signal(self.pid, signal.SIGINT):
            ladder.remove(signal.SIGINT)
        signum = ladder[min(self._interrupts, len(ladder) - 1)]
        self._interrupts += 1
        self.tree.refresh()
        _ladder_send(self.process, self.tree, signum)
        if signum == signal.SIGINT and self._escalation is None:
            # Started before it is published: ``wait`` joins it from the job's waiter, which
            # a job that ends at once on SIGINT wakes while this (niced, preempted) thread
            # may not have started it yet (RuntimeError, the waiter dead, the monitor hung).
            escalation = threading.Thread(
                target=self._escalate, name="gputop-train-stop", daemon=True
            )
            escalation.start()
            self._escalation = escalation
        return signal.Signals(signum).name

    def _escalate(self) -> None:
        """The ladder after Ctrl+C: SIGINT's grace, then where each rank waits, SIGTERM,
        its grace, SIGKILL of the group; a Ctrl+C pressed meanwhile went up a rung itself."""

        def send(signum: int) -> None:
            if signum == signal.SIGKILL or self._interrupts < 2:
                self.tree.signal(signum)
                after = stop_ladder.STOP_GRACE_S[1]
                grace = f"; SIGKILL in {after:g} s" if signum == signal.SIGTERM else ""
                self.tell(f"sent {signal.Signals(signum).name} to the job's processes{grace}")

        ended = partial(_ended_within, self.process, self.tree)
        if not climb(send, ended, self._hung, True):
            left = " ".join(map(str, self.tree.alive()))
            self.tell(f"processes of the job outlived SIGKILL (in the GPU driver?): PIDs {left}")

    def _hung(self) -> None:
        self.tell(
            f"the job has not exited {stop_ladder.STOP_GRACE_S[0]:g} s after SIGINT: a rank "
            "may wait in a collective another left; where each rank waits:"
        )
        try:
            where = self.where_waiting()
        except Exception as error:  # the dump is a courtesy: the stop goes on
            where = f"the stall dump failed: {error}"
        self.tell(where or "no rank's hook to ask (none connected)")

    def stop(self) -> None:
        stop_job(self.process, self.tree, self._hung)

    def terminate(self) -> str:
        """Pass on a SIGTERM the monitor got: SIGTERM to the job's group now, SIGKILL after
        TERMINATE_GRACE_S (or at once, asked again). Returns what was sent, to show."""
        if self._terminating is not None:
            self._terminating.cancel()
            self.tree.signal(signal.SIGKILL)
            return "SIGKILL"
        self.tree.signal(signal.SIGTERM)
        self._terminating = threading.Timer(TERMINATE_GRACE_S, self._kill_if_running)
        self._terminating.daemon = True
        self._terminating.start()
        return "SIGTERM"

    def _kill_if_running(self) -> None:
        if self.running() or self.tree.alive():
            self.tree.signal(signal.SIGKILL)
