"""Clients of the hook's socket that hang up at once, or never read (issue 31 points 6, 7)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook.listener import UNREAD_DROP_S
from gputop_train.job.launched import hook_environment
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session
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
    for _ in range(8):  # every slot, taken by clients that do read: they keep them
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        sock.setblocking(False)
        readers.append(sock)
        time.sleep(0.3)
    session = Session()
    client = HookClient(session, lambda: {job.pid})
    try:
        deadline = time.monotonic() + 10
        note = None
        while time.monotonic() < deadline:
            client.poll(0.1)
            note = session.snapshot().activity_note
            if note and "turned this monitor away" in note:
                break
        assert note is not None and "over 8 monitors at once" in note, note
    finally:
        client.close()
        for sock in readers:
            sock.close()
