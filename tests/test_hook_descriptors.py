"""The hook's descriptors stay out of the job's way (issue 39).

A job that closes every descriptor (daemonizing code, ``os.closerange``) and opens files
must find them untouched: the hook's sockets sit on high descriptors, and the hook checks
that each is still what it opened before it acts on it (a closed one is let go, never closed
again, and replaced).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook.listener import HIGH_FD, Listener, held_high
from tests.support.hooked import run_hooked
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)


def _listener(directory: Path) -> Listener:
    listener = Listener(
        wire.socket_path(os.getpid(), directory),
        hello=lambda: wire.Hello(pid=os.getpid()),
        rows_after=lambda step: [],
        take_frames=list,
        on_frame=lambda frame, client: None,
    )
    listener.start()
    return listener


def _hello(path: Path) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10.0)
        sock.connect(str(path))
        return sock.recv(65536)


def test_the_hooks_sockets_sit_on_high_descriptors() -> None:
    moved = held_high(socket.socket(socket.AF_UNIX))
    try:
        assert moved.fileno() >= min(HIGH_FD, os.sysconf("SC_OPEN_MAX") // 2)
        assert not os.get_inheritable(moved.fileno())
    finally:
        moved.close()


def test_descriptors_the_job_closed_and_reused_are_left_to_the_job(
    private_runtime_dir: Path, tmp_path: Path
) -> None:
    """Every descriptor of the listener closed and taken by a file of the job's at the same
    number: the files stay open and intact, and the listener serves a new monitor."""
    listener = _listener(wire.runtime_dir())
    try:
        with socket.socket(socket.AF_UNIX) as monitor:
            monitor.connect(str(listener.path))
            wait_until(lambda: listener.connected == 1)
            numbers = [listener._server.fileno(), listener._wake_read.fileno()]
            numbers += [listener._wake_write.fileno(), listener._clients[0].sock.fileno()]
            files = {}
            for number in numbers:  # the job's file takes the hook's number
                path = tmp_path / f"file-{number}"
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                os.dup2(fd, number, inheritable=False)
                os.close(fd)
                files[number] = path
            wait_until(
                lambda: listener.connected == 0 and listener._server.fileno() not in numbers,
                what="the listener let its descriptors go",
            )
            assert _hello(listener.path).startswith(b'{"v":1,"type":"hello"')
            for number, path in files.items():
                os.write(number, b"checkpoint")
                assert os.path.samestat(os.fstat(number), path.stat())
                os.close(number)
                assert path.read_bytes() == b"checkpoint"
    finally:
        listener.finish()


def test_a_job_that_closes_every_descriptor_keeps_its_checkpoint_files(tmp_path: Path) -> None:
    run = run_hooked(
        "closefds", f"dir={tmp_path}", "files=6", "close_at=20", timeout_s=120, tmp_path=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "checkpoints intact 6 of 6" in run.stdout
    # The monitor was served again after the close: it saw steps past the checkpoints.
    assert run.steps and run.steps[-1].step > 20 + 6 * 4
