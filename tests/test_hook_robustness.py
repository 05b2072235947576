"""The hook never slows, blocks or breaks the job; its socket is private."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gputop_train import wire
from gputop_train.hook import listener as listener_module
from gputop_train.hook.listener import Listener
from tests.support.hooked import run_hooked
from tests.support.waiting import wait_until


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


def test_the_socket_file_appears_only_once_it_listens(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A monitor that finds the file connects at once: bound but not yet listening, it was
    # refused (beside CPU hogs on the 2-core dev box).
    final = wire.socket_path(os.getpid(), wire.runtime_dir())
    seen_at_listen: list[bool] = []

    class Watched(socket.socket):
        def listen(self, backlog: int = 0) -> None:
            seen_at_listen.append(final.exists())
            super().listen(backlog)

    monkeypatch.setattr(listener_module.socket, "socket", Watched)
    listener = _listener(private_runtime_dir, start=False)
    try:
        assert seen_at_listen == [False]  # not there while it could not take a connection
        assert listener.path == final and final.exists()
        assert [p.name for p in private_runtime_dir.iterdir()] == [final.name]  # no temp left
        # The name it was bound under fits wherever the socket's does (the runtime directory's
        # length check is made for the socket's name).
        assert len(wire.binding_path(final).name) <= len(final.name)
        with _connected(listener):
            pass  # listening as soon as it is there
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
    step_column = wire.COLUMN["step"]
    # The lock the training thread publishes its facts under, which the listener's thread
    # takes for each send (hook/agent.py take_frames): the one place they meet.
    facts_lock = threading.Lock()

    def take_frames() -> list[bytes]:
        with facts_lock:
            return []

    listener = _listener(
        private_runtime_dir,
        rows_after=lambda n: [r for r in ring if r[step_column] > n],
        take_frames=take_frames,
    )
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(listener.path))  # ... and never calls recv()
    healthy = _connected(listener)  # a monitor that reads all along
    newest = {"step": 0}
    done = threading.Event()

    def read_healthy() -> None:
        decoder = wire.FrameDecoder()
        healthy.settimeout(0.2)
        while not done.is_set():
            try:
                data = healthy.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            for frame in decoder.feed(data):
                if frame["type"] == wire.STEPS and frame["rows"]:
                    newest["step"] = frame["rows"][-1][step_column]

    reader = threading.Thread(target=read_healthy, daemon=True)
    reader.start()
    try:
        wait_until(lambda: listener.connected == 2, what="both monitors connected")
        # The "training thread" appends rows at ~4,000 steps/s and publishes a fact every
        # 200 steps, until the stalled monitor's backlog passes the limit and it is dropped.
        step, served_while_stalled = 0, 0
        deadline = time.monotonic() + 120
        while listener.connected == 2:
            assert time.monotonic() < deadline, "the stalled monitor was never dropped"
            for _ in range(200):
                step += 1
                ring.append(_row(step))
            assert facts_lock.acquire(timeout=5.0), "the listener held the training thread"
            facts_lock.release()
            served_while_stalled = newest["step"]
            time.sleep(0.05)
        assert listener.connected == 1  # only the stalled monitor was dropped
        # The listener kept serving the reading monitor while the other one filled up ...
        assert served_while_stalled > 0
        # ... and goes on serving it: every step reaches it.
        wait_until(lambda: newest["step"] == step, what=f"step {step} reached the reader")
    finally:
        done.set()
        reader.join(timeout=5.0)
        stalled.close()
        healthy.close()
        listener.finish()


def test_a_frame_the_hook_cannot_take_is_skipped_and_the_listener_goes_on(
    private_runtime_dir: Path,
) -> None:
    taken: list[dict[str, Any]] = []

    def on_frame(frame: dict[str, Any], client: int) -> None:
        if frame.get("boom"):
            raise OverflowError("cannot convert float infinity to integer")
        taken.append(frame)

    listener = _listener(private_runtime_dir, on_frame=on_frame)
    try:
        with _connected(listener) as sock:
            sock.sendall(wire.encode("set_knob", boom=True) + wire.encode("scan_syncs"))
            wait_until(lambda: len(taken) == 1)
        assert listener.alive and listener.errors == 1
        assert _hello_of(listener)["pid"] == os.getpid()  # still serving
    finally:
        listener.finish()


def test_a_hello_that_cannot_be_built_closes_that_client_only(
    private_runtime_dir: Path,
) -> None:
    broken = [True]

    def hello() -> wire.Hello:
        if broken[0]:  # what a poisoned history once did
            return wire.Hello(pid=os.getpid(), knob_history=[{"id": float("nan")}])
        return wire.Hello(pid=os.getpid())

    listener = _listener(private_runtime_dir, hello=hello)
    try:
        with _connected(listener) as sock:
            assert sock.recv(1024) == b""  # closed, nothing sent
        broken[0] = False
        assert _hello_of(listener)["pid"] == os.getpid()
    finally:
        listener.finish()


def test_another_users_connection_is_refused_without_a_word(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "peer_uid", lambda sock: 4242)
    listener = _listener(private_runtime_dir)
    try:
        with _connected(listener) as sock:
            assert sock.recv(1024) == b""
        assert listener.refused == {listener_module.OTHER_USER: 1}
    finally:
        listener.finish()


def test_the_peer_uid_of_our_own_connection_is_ours(private_runtime_dir: Path) -> None:
    left, right = socket.socketpair()
    with left, right:
        assert listener_module.peer_uid(left) in (os.getuid(), None)


def test_a_monitor_over_the_limit_is_told_why(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "MAX_CLIENTS", 1)
    listener = _listener(private_runtime_dir)
    try:
        with _connected(listener) as first:
            first.recv(1024)
            wait_until(lambda: listener.connected == 1)
            with _connected(listener) as second:
                data = _read_all(second)
        assert b"hook refused this monitor: over 1 monitors at once" in data
    finally:
        listener.finish()


def test_a_failing_accept_backs_off_instead_of_spinning(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = _listener(private_runtime_dir, start=False)
    calls = []

    def accept(self: socket.socket) -> Any:
        calls.append(time.monotonic())
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(socket.socket, "accept", accept)  # only the listener accepts here
    listener.start()
    try:
        waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        waiting.connect(str(listener.path))  # stays queued: every accept fails
        time.sleep(2.5)
        waiting.close()
        # One try per ACCEPT_BACKOFF_S (1 s), where a retry at once made thousands.
        assert 1 <= len(calls) <= 4
        assert listener.alive
    finally:
        listener.finish()


def _listener(
    directory: Path,
    rows_after: Any = None,
    on_frame: Any = None,
    hello: Any = None,
    start: bool = True,
    take_frames: Any = list,
) -> Listener:
    listener = Listener(
        wire.socket_path(os.getpid(), wire.runtime_dir()),
        hello=hello or (lambda: wire.Hello(pid=os.getpid())),
        rows_after=rows_after or (lambda step: []),
        take_frames=take_frames,
        on_frame=on_frame or (lambda frame, client: None),
    )
    if start:
        listener.start()
    return listener


def _connected(listener: Listener) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5.0)
    sock.connect(str(listener.path))
    return sock


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _hello_of(listener: Listener) -> dict[str, Any]:
    with _connected(listener) as sock:
        decoder = wire.FrameDecoder()
        while True:
            frames = decoder.feed(sock.recv(65536))
            if frames:
                return frames[0]


def _row(step: int) -> list[Any]:
    row: list[Any] = [None] * len(wire.STEP_FIELDS)
    row[wire.COLUMN["step"]] = step
    return row


@pytest.mark.torch
def test_rows_after_a_step_come_from_the_newest_end_of_a_full_ring() -> None:
    from gputop_train.hook.step_ring import StepRing

    ring = StepRing(pytest.importorskip("torch"), steps=5)
    ring.rows.extend(_row(step) for step in range(1, 9))  # the ring keeps 4..8

    def steps(after: int) -> list[int]:
        return [row[wire.COLUMN["step"]] for row in ring.rows_after(after)]

    assert steps(6) == [7, 8]
    assert steps(0) == [4, 5, 6, 7, 8]  # a monitor further behind than the ring gets it all
    assert steps(8) == []


@pytest.mark.torch
def test_rows_after_tries_again_when_training_appends_during_the_walk() -> None:
    from collections import deque

    from gputop_train.hook.step_ring import StepRing

    class MovingRing(deque):
        moved = False

        def __reversed__(self):
            if not self.moved:  # the training thread appends step 4 mid-walk
                self.moved = True
                self.append(_row(4))
                raise RuntimeError("deque mutated during iteration")
            return super().__reversed__()

    ring = StepRing(pytest.importorskip("torch"))
    ring.rows = MovingRing(_row(step) for step in (1, 2, 3))
    assert [row[wire.COLUMN["step"]] for row in ring.rows_after(1)] == [2, 3, 4]
