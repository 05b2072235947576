"""Idle clients that keep reading cannot starve a new monitor (issue 39).

Seven idle readers and an eighth held every slot of the hook, and an attach saw 0 steps. A
monitor says it is there every few seconds (wire.ALIVE); at the limit, the client silent
longest gives its slot to a new one once it has been silent for SILENT_EVICT_S.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from gputop_train import wire
from gputop_train.hook import listener as listener_module
from gputop_train.hook.listener import MAX_CLIENTS, Listener
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def _listener() -> Listener:
    listener = Listener(
        wire.socket_path(os.getpid(), wire.runtime_dir()),
        hello=lambda: wire.Hello(pid=os.getpid()),
        rows_after=lambda step: [],
        take_frames=list,
        on_frame=lambda frame, client: None,
    )
    listener.start()
    return listener


def _first_frame(sock: socket.socket) -> dict[str, object]:
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before any frame"
        data += chunk
    frame = json.loads(data.split(b"\n")[0])
    assert isinstance(frame, dict)
    return frame


def _connect(listener: Listener) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10.0)
    sock.connect(str(listener.path))
    return sock


def _fill(listener: Listener) -> list[socket.socket]:
    readers = []
    for _ in range(MAX_CLIENTS):
        sock = _connect(listener)
        assert _first_frame(sock)["type"] == wire.HELLO
        readers.append(sock)
    return readers


def test_at_the_limit_a_new_client_is_refused_while_every_one_is_at_work(
    private_runtime_dir: Path,
) -> None:
    listener = _listener()
    readers = _fill(listener)
    try:
        with _connect(listener) as late:
            frame = _first_frame(late)
        assert frame["type"] == wire.NOTICE and "over 8 monitors" in str(frame["text"])
        assert listener.connected == MAX_CLIENTS
    finally:
        for sock in readers:
            sock.close()
        listener.finish()


def test_a_new_monitor_takes_the_slot_of_the_client_silent_longest(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "SILENT_EVICT_S", 0.3)
    listener = _listener()
    readers = _fill(listener)
    try:
        oldest, next_oldest = readers[0], readers[1]
        silent_since = listener._clients[1].heard_at
        wait_until(lambda: time.monotonic() - silent_since > listener_module.SILENT_EVICT_S)
        oldest.sendall(wire.Alive().encode())  # at work: the next one is silent longest
        wait_until(lambda: listener._clients[0].heard_at > listener._clients[1].heard_at)
        with _connect(listener) as attach:
            assert _first_frame(attach)["type"] == wire.HELLO
            assert listener.connected == MAX_CLIENTS
        said = b""
        while chunk := next_oldest.recv(65536):
            said += chunk
        assert b"hook dropped this client: silent while a new monitor waited" in said
        oldest.setblocking(False)
        with pytest.raises(BlockingIOError):  # still open: nothing more to read now
            while oldest.recv(65536):
                pass
    finally:
        for sock in readers:
            sock.close()
        listener.finish()


def test_the_monitor_says_it_is_there(private_runtime_dir: Path) -> None:
    listener = _listener()
    client = HookClient(Session(), lambda: {os.getpid()})
    try:
        wait_until(lambda: _polled(client) and listener.connected == 1)
        accepted = listener._clients[0].heard_at
        client._next_alive = 0.0  # due now, not in ALIVE_PERIOD_S
        wait_until(lambda: _polled(client) and listener._clients[0].heard_at > accepted)
    finally:
        client.close()
        listener.finish()


def _polled(client: HookClient) -> bool:
    client.poll(0.05)
    return True


def test_a_client_dropped_for_silence_has_not_left_one_that_closes_has(
    private_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A monitor starved of CPU (niced, beside CPU hogs) goes silent and may be dropped: its
    trial must stay (the CPU autopilot's trial was undone so, 2026-11-27); a monitor whose
    socket closes is gone, and its trials go with it."""
    monkeypatch.setattr(listener_module, "SILENT_EVICT_S", 0.3)
    left: list[int] = []
    listener = Listener(
        wire.socket_path(os.getpid(), wire.runtime_dir()),
        hello=lambda: wire.Hello(pid=os.getpid()),
        rows_after=lambda step: [],
        take_frames=list,
        on_frame=lambda frame, client: None,
        on_leave=left.append,
    )
    listener.start()
    readers = _fill(listener)
    try:
        silent = listener._clients[0]
        wait_until(lambda: time.monotonic() - silent.heard_at > listener_module.SILENT_EVICT_S)
        with _connect(listener) as attach:
            assert _first_frame(attach)["type"] == wire.HELLO  # took the silent one's slot
            assert silent not in listener._clients and left == []
            closing = listener._clients[0]  # readers[1]'s, the oldest left
        readers[1].close()
        wait_until(lambda: closing.number in left, 10.0, "the closed client's leave")
    finally:
        for sock in readers:
            sock.close()
        listener.finish()
