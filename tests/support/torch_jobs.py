"""Hooked jobs forked from a process that has imported torch already.

Why: a job started as ``python script.py`` spent 4.3 s of CPU on the 2-core dev box
importing torch and ``torch._dynamo`` (which any optimizer's constructor imports) and about a
second tearing them down (2026-11-27), while the loops the hook tests run take a fraction of
a second. Forked from a server that imported them once, a job starts in milliseconds.
What the tests measure is unchanged: a real process with real torch, the product's own boot
file (``hook/boot/sitecustomize.py``) run under the job's environment, the hook's real
socket, and the job's exit code and signals. What differs from a fresh interpreter is only
that torch is imported before the hook arms, the path of a script that imports
``gputop_train.hook`` after torch; the import-watcher path (the hook armed before torch
loads) is covered by every test that launches a job through the CLI, which never uses this
server. PyTorch itself forks after its import for every DataLoader worker.

One server per test process (each xdist worker), started at the first job; closing its
stdin (the test process exiting) ends it and kills any job still running.

    job = spawn([script, *args], env=..., cwd=..., stdout=path, stderr=path)
    job.pid; job.poll(); job.wait(timeout); job.send_signal(sig); job.kill()
"""

from __future__ import annotations

import atexit
import gc
import importlib
import itertools
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from .paths import REPO

# What a hooked training job imports before its first step, whatever its script: torch, the
# compiler stack any optimizer's constructor imports, the DataLoader, the hook's FLOP count.
PRELOADED = ("torch", "torch._dynamo", "torch.utils.data", "torch.utils.flop_counter")
# Set (comma-separated, maybe empty) to preload other modules: a test of the server itself,
# whose jobs need no torch, starts it in well under a second rather than the 15 s its
# imports took beside other work (load ~6.7 on the 2-core dev box, 2026-11-27).
PRELOAD_ENV = "TORCH_JOBS_PRELOAD"


class ForkedJob:
    """The part of ``subprocess.Popen`` the tests use, for a job the server forked."""

    def __init__(self, server: _Server, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.returncode = self._server.wait_exit(self.pid, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    """The test process's side: sends job requests, learns PIDs and exit codes."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_TRAIN_")}
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "tests.support.torch_jobs"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=env,
        )
        self._ids = itertools.count()
        self._lock = threading.Condition()
        self._spawned: dict[int, int] = {}  # request id -> pid
        self._exited: dict[int, int] = {}  # pid -> exit code (negative: the signal)
        self._gone = False  # the server ended: nothing more will be forked or told
        self._send_lock = threading.Lock()
        threading.Thread(target=self._read, name="torch-jobs-reader", daemon=True).start()
        atexit.register(self.close)

    def spawn(self, request: dict[str, Any]) -> int:
        """The forked job's PID, once the server has forked it: the first request waits for
        the server to import torch, which on a loaded box took over the 60 s this once allowed
        (beside six other sessions' work on the 2-core dev box, 2026-11-27); the test's own
        timeout bounds the wait, and a server that died ends it at once."""
        request_id = next(self._ids)
        line = json.dumps({**request, "id": request_id}).encode() + b"\n"
        assert self._process.stdin is not None
        with self._send_lock:
            self._process.stdin.write(line)
            self._process.stdin.flush()
        with self._lock:
            self._lock.wait_for(lambda: request_id in self._spawned or self._gone)
            if request_id not in self._spawned:
                raise RuntimeError("the torch job server did not fork the job (see its stderr)")
            return self._spawned.pop(request_id)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            return self._exited.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        with self._lock:
            self._lock.wait_for(lambda: pid in self._exited or self._gone, timeout)
            if pid in self._exited:
                return self._exited[pid]
            if self._gone:
                raise RuntimeError(f"the torch job server ended before job {pid} did")
            raise subprocess.TimeoutExpired(f"forked job {pid}", timeout or 0.0)

    def close(self) -> None:
        if self._process.poll() is None and self._process.stdin is not None:
            self._process.stdin.close()  # the server kills its jobs and exits
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            message = json.loads(line)
            with self._lock:
                if "spawned" in message:
                    self._spawned[message["id"]] = message["spawned"]
                else:
                    self._exited[message["exited"]] = message["returncode"]
                self._lock.notify_all()
        with self._lock:
            self._gone = True
            self._lock.notify_all()


_server: _Server | None = None
_server_lock = threading.Lock()


def spawn(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path = REPO,
    stdout: Path | None = None,
    stderr: Path | None = None,
    new_session: bool = False,
) -> ForkedJob:
    """Start ``python argv...`` under ``env`` as a job forked from the torch server; its
    output appended to ``stdout`` and ``stderr`` (None: discarded), in a session of its own
    with ``new_session`` (as the launcher leaves a job)."""
    global _server
    with _server_lock:
        if _server is None:
            _server = _Server()
        server = _server
    request = {
        "argv": [str(a) for a in argv],
        "env": env,
        "cwd": str(cwd),
        "stdout": str(stdout or os.devnull),
        "stderr": str(stderr or os.devnull),
        "new_session": new_session,
    }
    return ForkedJob(server, server.spawn(request))


# -- the server process ---------------------------------------------------------------------


def _serve() -> dict[str, Any] | None:
    """Fork a job per request line on stdin; tell each PID and each exit on stdout. Returns
    the request in a forked child (which then becomes the job), None when stdin closes."""
    # The point: every job forked below has these imported. Building any optimizer imports
    # torch._dynamo (2.0 s of the 4.3 s a fresh job spent before its first step here).
    named = os.environ.get(PRELOAD_ENV)
    for module in PRELOADED if named is None else [m for m in named.split(",") if m]:
        importlib.import_module(module)
    # What was imported stays out of every collection, the one at a job's exit too: a job that
    # trained six steps took 1.58 s from fork to exit without this, 0.53 s with it.
    gc.freeze()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    control_out = os.dup(1)
    children: set[int] = set()
    pending = b""

    def tell(message: dict[str, Any]) -> None:
        os.write(control_out, json.dumps(message).encode() + b"\n")

    def reap() -> None:
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            children.discard(pid)
            tell({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})

    while True:
        try:
            ready, _, _ = select.select([0, wake_read], [], [])
        except InterruptedError:
            continue
        if wake_read in ready:
            os.read(wake_read, 4096)
            reap()
        if 0 not in ready:
            continue
        data = os.read(0, 1 << 16)
        if not data:  # the test process is gone: no job outlives it
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            return None
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_read, wake_write, control_out):
                    os.close(fd)
                return request
            children.add(pid)
            tell({"id": request["id"], "spawned": pid})
        reap()


def _become(request: dict[str, Any]) -> None:
    """In the forked child: what ``python SCRIPT ARGS`` would set up, then run the script."""
    if request["new_session"]:
        os.setsid()
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.close(null)
    script = os.path.abspath(request["argv"][0])
    sys.argv = [script, *request["argv"][1:]]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:1] = [os.path.dirname(script), *(os.path.abspath(p) for p in extra)]
    for entry in extra:  # the interpreter imports sitecustomize from PYTHONPATH at start
        boot = os.path.join(entry, "sitecustomize.py")
        if os.path.exists(boot):
            runpy.run_path(boot, run_name="sitecustomize")
            break
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    _job = _serve()
    if _job is not None:
        _become(_job)
