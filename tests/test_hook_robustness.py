"""The hook never slows, blocks or breaks the job; its socket is private."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.hook import listener as listener_module
from gputop_train.hook.listener import Listener
from tests.conftest import run_hooked


def test_a_monitor_connecting_late_receives_the_recent_steps(tmp_path: Path) -> None:
    # 20 steps happen in the first second or two; the monitor connects ~3 s in.
    run = run_hooked("late_monitor", "steps=20", "idle_s=4", connect_after_s=3.0, tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert [s.step for s in run.steps] == list(range(1, 21))


def test_an_internal_hook_error_disables_the_hook_and_training_completes(tmp_path: Path) -> None:
    run = run_hooked("broken_hook", "steps=20", tmp_path=tmp_path)
    assert run.returncode == 0
    assert "trained 20 steps" in run.stdout
    assert run.stderr.count("gputop-train hook disabled") == 1  # said once, not per step
    assert "injected hook fault" in run.stderr


def test_the_hook_works_where_only_torch_is_installed(tmp_path: Path) -> None:
    run = run_hooked("hook_state", extra_env={"BLOCK_MONITOR_DEPS": "1"}, tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "hooked: True" in run.stdout
    assert [s.step for s in run.steps] == [1, 2, 3]


def test_socket_and_directory_are_private(tmp_path: Path, private_runtime_dir: Path) -> None:
    listener = _listener(private_runtime_dir)
    try:
        assert stat.S_IMODE(private_runtime_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(listener.path.stat().st_mode) == 0o600
        assert listener.path.name == f"{os.getpid()}.sock"
    finally:
        listener.finish()


def test_a_directory_open_to_other_users_is_refused(private_runtime_dir: Path) -> None:
    private_runtime_dir.mkdir(mode=0o755)
    os.chmod(private_runtime_dir, 0o755)
    with pytest.raises(wire.UnsafeRuntimeDir, match="chmod 700"):
        wire.runtime_dir()


def test_a_monitor_that_stops_reading_is_dropped_and_never_blocks_the_producer(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "MAX_CLIENT_BUFFER_BYTES", 256 * 1024)
    ring: list[list[Any]] = []
    listener = _listener(private_runtime_dir, rows_after=lambda n: [r for r in ring if r[0] > n])
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(listener.path))  # ... and never calls recv()
    try:
        _wait_until(lambda: listener.connected == 1)
        # The "training thread" appends far more than the socket can hold; nothing it
        # does touches the socket, so every append returns at once.
        for step in range(1, 200_001):
            ring.append([step, 0.0, 1.0, 0.5, 32, 1, None, None, None, None])
        _wait_until(lambda: listener.connected == 0)
    finally:
        stalled.close()
        listener.finish()


def _listener(directory: Path, rows_after: Any = None) -> Listener:
    listener = Listener(
        wire.socket_path(os.getpid(), wire.runtime_dir()),
        hello=lambda: {"pid": os.getpid()},
        rows_after=rows_after or (lambda step: []),
        take_frames=list,
        on_frame=lambda frame: None,
    )
    listener.start()
    return listener


def _wait_until(condition: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
