"""Clients of the hook's socket that hang up at once, or never read (issue 31 points 6, 7)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from gputop_train import wire
from gputop_train.hook.listener import UNREAD_DROP_S
from gputop_train.job.launched import hook_environment
from gputop_train.monitor import hook_client
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session
from gputop_train.views import activity_note
from tests.support import torch_jobs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)  # real hooked jobs, waits of UNREAD_DROP_S and more

REPO = Path(__file__).resolve().parents[1]
LOOPS = REPO / "tests" / "scenarios" / "loops.py"


@pytest.fixture
def knobbed_job(private_runtime_dir: Path):
    job = torch_jobs.spawn(
        [str(LOOPS), "knobbed", "steps=100000"], env=hook_environment(os.environ)
    )
    path = wire.socket_path(job.pid, wire.runtime_dir(create=False))

    def listening() -> bool:
        assert job.poll() is None, "the job ended before it listened"
        return path.exists()

    wait_until(listening, 60, what="the job listened")
    yield job, path
    job.kill()
    job.wait()


def _hello(path: Path, timeout_s: float = 10.0) -> dict:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        data = b""
        while b"\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, "closed before a hello"
            data += chunk
    frame = json.loads(data.split(b"\n")[0])
    assert frame["type"] == wire.HELLO, frame
    return frame


def test_a_one_shot_clients_command_is_acted_on(knobbed_job) -> None:
    _, path = knobbed_job
    values = list(range(20, 30))
    for value in values:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            sock.sendall(wire.encode(wire.SET_KNOB, id=value, name="step_ms", value=value))
        time.sleep(0.3)  # the hook serves 4 new connections a second
    deadline = time.monotonic() + 30
    applied: list[int] = []
    while time.monotonic() < deadline:
        history = _hello(path)["knob_history"]
        applied = [o["value"] for o in history if o.get("ok") and o.get("name") == "step_ms"]
        if len(applied) >= len(values):
            break
        time.sleep(0.5)
    assert applied == values  # 10 of 10, in order (0 of 10 before)


def test_clients_that_never_read_lose_their_slots_to_a_monitor(knobbed_job) -> None:
    job, path = knobbed_job
    idle = []
    for _ in range(8):  # every slot
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        idle.append(sock)
        time.sleep(0.3)
    session = Session()
    client = HookClient(session, lambda: {job.pid})
    started = time.monotonic()
    try:
        while not session.hooked_pids() and time.monotonic() - started < UNREAD_DROP_S + 60:
            client.poll(0.1)
        served_after = time.monotonic() - started
        assert session.hooked_pids() == {job.pid}, "the monitor was never served"
        assert served_after >= 1.0  # it was refused at first: the slots were all taken
        # An honest monitor reads, so it keeps its slot past the idle clients' limit.
        until = time.monotonic() + UNREAD_DROP_S + 3
        while time.monotonic() < until:
            client.poll(0.1)
        assert client.connected_pids == {job.pid}
    finally:
        client.close()
        for sock in idle:
            sock.close()


def test_an_attacher_turned_away_is_told_so_at_once(knobbed_job) -> None:
    job, path = knobbed_job
    readers = []
    # Every slot, taken by clients that never read: they keep them for UNREAD_DROP_S from their
    # hello, and the monitor below must be told at once, well within that.
    for _ in range(8):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        sock.setblocking(False)
        readers.append(sock)
        time.sleep(0.3)
    session = Session()
    client = HookClient(session, lambda: {job.pid})
    try:
        deadline = time.monotonic() + UNREAD_DROP_S - 8 * 0.3 - 1
        note = None
        while time.monotonic() < deadline:
            client.poll(0.1)
            note = activity_note(session.snapshot().activity)
            if note and "turned this monitor away" in note:
                break
        assert note is not None and "over 8 monitors at once" in note, note
    finally:
        client.close()
        for sock in readers:
            sock.close()


def test_a_refusal_sent_before_the_monitors_first_word_is_still_read(tmp_path: Path) -> None:
    """The hook turns a monitor away and closes at once, before the monitor's first send (an
    ``alive``): that send fails (EPIPE), and the reason, already in the monitor's socket, must
    still be read. It was lost, 3 of 3 on a quiet box: the note read "waiting for the first
    training step" (issue 46)."""
    path = wire.socket_path(os.getpid(), tmp_path)
    closed = threading.Event()
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)

        def refuse() -> None:
            sock, _ = server.accept()
            sock.send(wire.Notice("hook refused this monitor: over 8 monitors at once").encode())
            sock.close()
            closed.set()

        class ClosedBeforeItsFirstSend(socket.socket):
            def connect(self, address: Any) -> None:
                super().connect(address)
                assert closed.wait(10)

        refuser = threading.Thread(target=refuse)
        refuser.start()
        session = Session()
        with mock.patch.object(hook_client.socket, "socket", ClosedBeforeItsFirstSend):
            client = HookClient(session, lambda: {os.getpid()}, directory=tmp_path)
            try:
                client.poll(0.1)
            finally:
                client.close()
        refuser.join()
    note = activity_note(session.snapshot().activity)
    assert note is not None and "turned this monitor away (over 8 monitors at once)" in note
