"""The hook's socket server: a daemon thread that ships step batches to connected monitors.

Only this thread touches the socket. The training thread appends rows to a ring and moves
on; a monitor that stops reading fills its own bounded buffer and is dropped, so it can
never slow or block training.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import wire

# The architecture's budget: at most ~10 frames/s, each with every step since the last.
SEND_PERIOD_S = 0.1
# A monitor this far behind (a frozen SSH session, a stopped process) is dropped.
MAX_CLIENT_BUFFER_BYTES = 8 * 1024 * 1024


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.outbox = bytearray()
        self.decoder = wire.FrameDecoder()


class Listener:
    """Accepts monitors on ``path``; sends each the hello, the ring's backlog, then batches."""

    def __init__(
        self,
        path: Path,
        hello: Callable[[], dict[str, Any]],
        rows_after: Callable[[int], list[list[Any]]],
        take_frames: Callable[[], list[bytes]],
        on_frame: Callable[[dict[str, Any]], None],
    ) -> None:
        self.path = path
        self._hello = hello
        self._rows_after = rows_after
        self._take_frames = take_frames
        self._on_frame = on_frame
        self._clients: list[_Client] = []
        self._sent_upto = 0
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._server = self._bind(path)
        self._selector.register(self._server, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="gputop-train-hook", daemon=True)

    @staticmethod
    def _bind(path: Path) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket from an earlier process with our PID
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        os.chmod(path, 0o600)  # the directory is 0700 already; this is belt and braces
        server.listen(8)
        server.setblocking(False)
        return server

    def start(self) -> None:
        self._thread.start()

    @property
    def connected(self) -> int:
        return len(self._clients)

    def finish(self, wait_for_monitor_s: float = 0.0, timeout_s: float = 2.0) -> None:
        """Send what is left and a goodbye, then close; waits briefly for a monitor we expect."""
        deadline = time.monotonic() + wait_for_monitor_s
        while not self._clients and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.02)
        self._stop.set()
        self._finished.wait(timeout_s)

    def _run(self) -> None:
        try:
            next_send = time.monotonic()
            while not self._stop.is_set():
                for key, _ in self._selector.select(timeout=SEND_PERIOD_S / 2):
                    if key.fileobj is self._server:
                        self._accept()
                    else:
                        self._read(key.data)
                if time.monotonic() >= next_send:
                    self._broadcast_new_rows()
                    next_send = time.monotonic() + SEND_PERIOD_S
                self._flush_all()
            self._broadcast_new_rows()
            self._broadcast(wire.encode(wire.BYE, pid=os.getpid()))
            self._flush_all(blocking_s=0.5)
        finally:
            self._close()
            self._finished.set()

    def _accept(self) -> None:
        try:
            sock, _ = self._server.accept()
        except OSError:
            return
        sock.setblocking(False)
        client = _Client(sock)
        client.outbox += wire.encode(wire.HELLO, **self._hello())
        backlog = self._rows_after(0)
        backlog = [row for row in backlog if row[wire.COLUMN["step"]] <= self._sent_upto]
        if backlog:
            client.outbox += wire.encode(wire.STEPS, pid=os.getpid(), rows=backlog)
        self._clients.append(client)
        self._selector.register(sock, selectors.EVENT_READ, client)

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        for frame in client.decoder.feed(data):
            self._on_frame(frame)

    def _broadcast_new_rows(self) -> None:
        rows = self._rows_after(self._sent_upto)
        if rows:
            self._sent_upto = rows[-1][wire.COLUMN["step"]]
            self._broadcast(wire.encode(wire.STEPS, pid=os.getpid(), rows=rows))
        for frame in self._take_frames():
            self._broadcast(frame)

    def _broadcast(self, frame: bytes) -> None:
        for client in list(self._clients):
            client.outbox += frame
            if len(client.outbox) > MAX_CLIENT_BUFFER_BYTES:
                self._drop(client)

    def _flush_all(self, blocking_s: float = 0.0) -> None:
        deadline = time.monotonic() + blocking_s
        while True:
            for client in list(self._clients):
                self._flush(client)
            if not any(c.outbox for c in self._clients) or time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def _flush(self, client: _Client) -> None:
        while client.outbox:
            try:
                sent = client.sock.send(client.outbox)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._drop(client)
                return
            del client.outbox[:sent]

    def _drop(self, client: _Client) -> None:
        if client in self._clients:
            self._clients.remove(client)
            with contextlib.suppress(Exception):
                self._selector.unregister(client.sock)
            client.sock.close()

    def _close(self) -> None:
        for client in list(self._clients):
            self._drop(client)
        with contextlib.suppress(Exception):
            self._selector.unregister(self._server)
        self._server.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
