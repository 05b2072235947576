"""The hook's socket server: a daemon thread that ships step batches to connected monitors.

Only this thread touches the socket. The training thread appends rows to a ring and moves
on. Whatever a client does, it cannot stop this thread or slow training more than a bounded
amount (docs/security.md): a handful of clients at a time, each within a budget of bytes,
reads and frames per second, every frame handled under its own ``try``, large encodes cut
into pieces so the training thread gets the GIL between them, and a client that stops
reading is dropped once its buffer fills.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import resource
import selectors
import socket
import struct
import threading
import time

try:  # Linux: how much of what we sent a client has not read yet
    from fcntl import ioctl
    from termios import TIOCOUTQ
except ImportError:  # elsewhere a stalled client is dropped when its buffer fills
    ioctl, TIOCOUTQ = None, 0  # type: ignore[assignment,misc]
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import wire

# The architecture's budget: at most 5 frames/s, each with every step since the last. The
# thread sleeps until the next send (or a client's frame): each wake-up costs the job CPU
# (this thread woke 20 times a second at 0.1 s and a half-period poll; the monitor spent
# ~0.28 ms of CPU on each frame it read: tui_cost.py --threads, dev box, 2026-11-24). One
# frame per refresh of the TUI (0.5 s) is all a screen can show; the figures are sums of
# step times, so a frame that lands late shifts no rate (session/stats.py).
SEND_PERIOD_S = wire.SEND_PERIOD_S
# While a late client's backlog is still going out in pieces, the thread comes back this
# soon. Output that waits in a full socket buffer waits for the next send: a monitor that
# stopped reading (a frozen SSH session) must not make the thread spin.
BUSY_WAIT_S = 0.02
# A monitor this far behind (a frozen SSH session, a stopped process) is dropped: minutes of
# steps, and at most MAX_CLIENTS x this in the job's memory.
MAX_CLIENT_BUFFER_BYTES = 4 * 1024 * 1024
# A TUI, a headless monitor and a few attaches at once; each costs a buffer and an encode
# of every batch. 2000 idle clients took a job from 682 MB to 3.8 GB (issue 13's attack run).
MAX_CLIENTS = 8
# New connections served per second (burst of ACCEPT_BURST): each costs a hello and the
# backlog. Beyond it, connections wait in the kernel's queue (a reconnecting client at
# ~10,000/s cost the job 40-80% of its step rate before this limit:
# benchmarks/frontends/attacks.py).
ACCEPTS_PER_S, ACCEPT_BURST = 4.0, 8
# After a failed accept (no file descriptors left), wait before trying again: a failed
# accept leaves the connection queued, so retrying at once spins (34% slower training).
ACCEPT_BACKOFF_S = 1.0
# A client that leaves what we sent unread this long is not a monitor at work (an honest one
# reads within milliseconds of each send; a frozen one reconnects when it wakes and is sent
# the backlog): its slot goes to the next. Seven idle clients kept an attach out for good.
UNREAD_DROP_S = 10.0
# A monitor says it is there at least this often (hook_client.ALIVE_PERIOD_S is 5 s): one
# that said nothing for this long is idle, and at MAX_CLIENTS a new connection takes its slot
# (seven idle clients that kept reading held every slot: an attach saw 0 steps, issue 39).
SILENT_EVICT_S = 15.0
# The hook's descriptors go at or above this (or as high as the limit allows), out of the way
# of a job that closes and reuses descriptors (daemonizing code, os.closerange): the job's new
# files take the lowest free numbers.
HIGH_FD = 1000
# Refused and dropped clients are told to the monitors at most this often (per reason).
REFUSALS_TOLD_EVERY_S = 5.0
# Rows per STEPS frame of a backlog: a late monitor's backlog goes out in pieces.
BACKLOG_ROWS_PER_FRAME = 512


class _Budget:
    """A token bucket: ``rate`` per second, up to ``burst`` saved."""

    __slots__ = ("_last", "_rate", "_tokens", "burst")

    def __init__(self, rate: float, burst: float) -> None:
        self._rate, self.burst = rate, burst
        self._tokens = burst
        self._last = time.monotonic()

    def take(self, amount: float) -> bool:
        """Spend ``amount`` if the bucket holds it; False (nothing spent) if not."""
        self._refill()
        if self._tokens < amount:
            return False
        self._tokens -= amount
        return True

    def seconds_until(self, amount: float) -> float:
        """How long until ``amount`` can be spent."""
        self._refill()
        return max(0.0, (amount - self._tokens) / self._rate)

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self._rate)
        self._last = now


class _Client:
    # What an honest monitor sends is a few small commands a second (set_knob, scan_syncs);
    # these budgets are ~10x that, and a client over any of them is dropped.
    BYTES_PER_S, BYTES_BURST = 64 * 1024, 256 * 1024
    READS_PER_S, READS_BURST = 50, 200
    FRAMES_PER_S, FRAMES_BURST = 50, 200

    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock = sock
        self.number = number  # how the agent tells this monitor's changes and trials apart
        self.identity = _identity(sock)
        self.heard_at = time.monotonic()  # the last time it sent anything
        self.outbox = bytearray()
        self.backlog: list[bytes] = []  # encoded rows still to send, before any new ones
        self.decoder = wire.FrameDecoder(max_frame_bytes=wire.MAX_COMMAND_BYTES)
        self.bytes = _Budget(self.BYTES_PER_S, self.BYTES_BURST)
        self.reads = _Budget(self.READS_PER_S, self.READS_BURST)
        self.frames = _Budget(self.FRAMES_PER_S, self.FRAMES_BURST)
        self.sent_bytes = 0  # handed to the kernel so far
        self.read_bytes = 0  # of those, read by the client (as of the last check)
        self.stalled_since: float | None = None  # unread output and no reading since

    def within_budget(self, data: bytes) -> bool:
        lines = data.count(b"\n")
        return self.reads.take(1) and self.bytes.take(len(data)) and self.frames.take(lines)


class Listener:
    """Accepts monitors on ``path``; sends each the hello, the ring's backlog, then batches."""

    def __init__(
        self,
        path: Path,
        hello: Callable[[], wire.Hello],
        rows_after: Callable[[int], list[list[Any]]],
        take_frames: Callable[[], list[bytes]],
        on_frame: Callable[[dict[str, Any], int], None],
        backlog_rows: int = 8192,
        on_leave: Callable[[int], None] | None = None,
        record_rows: Callable[[int, list[bytes]], wire.Frame | None] | None = None,
    ) -> None:
        self.path = path
        self._hello = hello
        self._rows_after = rows_after
        self._take_frames = take_frames
        self._on_frame = on_frame
        self._on_leave = on_leave
        # The rows of each send (from their first step), to the recording too; a frame it
        # returns (it stopped: wire.RowsUnrecorded) goes out before them.
        self._record_rows = record_rows
        self._clients: list[_Client] = []
        self._numbers = itertools.count(1)
        self._sent_upto = 0
        # Every row sent, encoded once: a late monitor's backlog is a join, not an encode
        # (8,192 rows took 13 ms to encode on the dev box, at each connection).
        self._sent_rows: deque[bytes] = deque(maxlen=backlog_rows)
        self._stop = threading.Event()
        self._finished = threading.Event()
        # poll(2) holds no descriptor of its own (epoll's would be the job's to close).
        self._selector = selectors.PollSelector()
        self._accepts = _Budget(ACCEPTS_PER_S, ACCEPT_BURST)
        self._accept_paused_until = 0.0
        # What clients were refused or dropped for, by reason: told to the monitors (NOTICE).
        self.refused: dict[str, int] = {}
        self._refusals_told: dict[str, int] = {}
        self._next_refusals_told = 0.0
        self.errors = 0  # errors caught in the loop (a frame, a client), never raised
        self._server = self._bind(path)
        self._server_id = _identity(self._server)
        self._selector.register(self._server, selectors.EVENT_READ)
        self._next_send = 0.0
        self._wake_read, self._wake_write, self._wake_ids = self._wake_pair()
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="gputop-train-hook", daemon=True)

    @staticmethod
    def _wake_pair() -> tuple[socket.socket, socket.socket, tuple[Any, Any]]:
        """``finish`` writes to the second to end the thread's wait at once (the job exits)."""
        read, write = (held_high(end) for end in socket.socketpair())
        for end in (read, write):
            end.setblocking(False)
        return read, write, (_identity(read), _identity(write))

    @staticmethod
    def _bind(path: Path) -> socket.socket:
        """Listen at ``path``. The socket is bound under another name and renamed once it
        listens: a monitor that finds the file is never refused (bound but not yet listening,
        it was, beside CPU hogs on the 2-core dev box, 2026-11-27)."""
        binding = wire.binding_path(path)
        for stale in (path, binding):  # from an earlier process with our PID
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        server = held_high(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        server.bind(str(binding))
        os.chmod(binding, 0o600)  # the directory is 0700 already; this is belt and braces
        server.listen(MAX_CLIENTS)
        server.setblocking(False)
        os.replace(binding, path)
        return server

    def start(self) -> None:
        self._thread.start()

    @property
    def connected(self) -> int:
        return len(self._clients)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def finish(self, wait_for_monitor_s: float = 0.0, timeout_s: float = 2.0) -> None:
        """Send what is left and a goodbye, then close; waits briefly for a monitor we expect."""
        deadline = time.monotonic() + wait_for_monitor_s
        while not self._clients and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.02)
        self._stop.set()
        if _identity(self._wake_write) == self._wake_ids[1]:  # never a byte into the job's
            with contextlib.suppress(OSError):
                self._wake_write.send(b"\0")
        self._finished.wait(timeout_s)

    def _run(self) -> None:
        try:
            self._next_send = time.monotonic()
            while not self._stop.is_set():
                try:
                    self._turn()
                    if time.monotonic() >= self._next_send:
                        self._drop_stalled()
                        self._broadcast_new_rows()
                        self._tell_refusals()
                        self._next_send = time.monotonic() + SEND_PERIOD_S
                    self._flush_all()
                except Exception:  # never let one bad turn end the listener
                    self.errors += 1
                    time.sleep(SEND_PERIOD_S)
            with contextlib.suppress(Exception):
                self._broadcast_new_rows()
                while any(c.backlog for c in self._clients):
                    self._send_backlogs()
                self._broadcast(wire.Bye(os.getpid()).encode())
                self._flush_all(blocking_s=0.5)
        finally:
            self._close()
            self._finished.set()

    def _turn(self) -> None:
        """Wait for sockets until the next send is due, then serve each one."""
        self._check_descriptors()
        if self._accept_paused_until and time.monotonic() >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            self._selector.register(self._server, selectors.EVENT_READ)
        for key, _ in self._selector.select(timeout=self._wait_s()):
            if key.fileobj is self._server:
                self._accept()
            elif key.fileobj is self._wake_read:
                with contextlib.suppress(OSError):
                    self._wake_read.recv(4096)
            else:
                self._read(key.data)
        self._send_backlogs()

    def _wait_s(self) -> float:
        """How long to wait for sockets: until the next send, or a moment while a backlog
        goes out, or until a paused accept may resume."""
        now = time.monotonic()
        if any(c.backlog for c in self._clients):
            return BUSY_WAIT_S
        wait = self._next_send - now
        if self._accept_paused_until:
            wait = min(wait, self._accept_paused_until - now)
        return max(0.0, wait)

    def _check_descriptors(self) -> None:
        """Each descriptor of ours still the object we opened (the job may have closed it and
        opened a file that took its number): one that is not is let go without a close (the
        number is the job's now) and replaced; its clients reconnect."""
        for client in list(self._clients):
            if _identity(client.sock) != client.identity:
                self._forget(client)
        if _identity(self._server) != self._server_id:
            self.errors += 1
            with contextlib.suppress(Exception):
                self._selector.unregister(self._server)
            self._server.detach()
            self._accept_paused_until = 0.0
            self._server = self._bind(self.path)
            self._server_id = _identity(self._server)
            self._selector.register(self._server, selectors.EVENT_READ)
        if (_identity(self._wake_read), _identity(self._wake_write)) != self._wake_ids:
            self.errors += 1
            with contextlib.suppress(Exception):
                self._selector.unregister(self._wake_read)
            for end, ident in zip((self._wake_read, self._wake_write), self._wake_ids, strict=True):
                _release(end, ident)
            self._wake_read, self._wake_write, self._wake_ids = self._wake_pair()
            self._selector.register(self._wake_read, selectors.EVENT_READ)

    def _forget(self, client: _Client) -> None:
        """A client whose descriptor is no longer its socket: dropped, its number untouched."""
        self.errors += 1
        if client in self._clients:
            self._clients.remove(client)
            with contextlib.suppress(Exception):
                self._selector.unregister(client.sock)
            client.sock.detach()
            self._left(client)

    def _accept(self) -> None:
        if not self._accepts.take(1):  # over the rate: leave them queued in the kernel
            self._pause_accepting(self._accepts.seconds_until(1))
            return
        try:
            sock, _ = self._server.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EMFILE and friends: a retry at once would spin
            self._pause_accepting(ACCEPT_BACKOFF_S)
            self._count("accept failed (out of file descriptors?)")
            return
        sock = held_high(sock)
        reason = self._refusal(sock)
        if reason is not None:
            self._count(reason)
            if reason != OTHER_USER:  # a monitor of ours: say why, so its Log can tell
                with contextlib.suppress(OSError):
                    sock.setblocking(False)
                    sock.send(wire.Notice(f"hook refused this monitor: {reason}").encode())
            sock.close()
            return
        sock.setblocking(False)
        client = _Client(sock, next(self._numbers))
        try:
            client.outbox += self._hello().encode()
        except Exception:  # the hook's own state could not be told: this client goes
            self.errors += 1
            sock.close()
            return
        client.backlog = list(self._sent_rows)
        self._clients.append(client)
        self._selector.register(sock, selectors.EVENT_READ, client)

    def _refusal(self, sock: socket.socket) -> str | None:
        """Why a new connection is not served, or None."""
        if not _same_user(sock):
            return OTHER_USER
        if len(self._clients) >= MAX_CLIENTS and not self._evict_silent():
            return f"over {MAX_CLIENTS} monitors at once"
        return None

    def _evict_silent(self) -> bool:
        """Make room for a new client: drop the one silent longest, if it has said nothing
        for SILENT_EVICT_S (a monitor at work says it is there every few seconds)."""
        now = time.monotonic()
        silent = min(self._clients, key=lambda c: c.heard_at)
        if now - silent.heard_at < SILENT_EVICT_S:
            return False
        self._count(f"a client silent for {SILENT_EVICT_S:g} s, for a new one")
        with contextlib.suppress(OSError):
            silent.sock.send(
                wire.Notice("hook dropped this client: silent while a new monitor waited").encode()
            )
        self._drop(silent, left=False)
        return True

    def _pause_accepting(self, seconds: float) -> None:
        """Stop selecting the server socket for ``seconds``; connections wait in its queue."""
        self._selector.unregister(self._server)
        self._accept_paused_until = time.monotonic() + max(seconds, 0.01)

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
        self._take(client, data)

    def _take(self, client: _Client, data: bytes) -> None:
        """Act on the frames in ``data``; a client over its budget is dropped instead."""
        if not client.within_budget(data):
            self._count("a client over its budget of commands")
            self._drop(client)
            return
        client.heard_at = time.monotonic()
        for frame in client.decoder.feed(data):
            try:
                self._on_frame(frame, client.number)
            except Exception:  # a frame the hook could not take: skipped, the rest go on
                self.errors += 1

    def _send_backlogs(self) -> None:
        """Send each late client a piece of the steps it missed (see BACKLOG_ROWS_PER_FRAME)."""
        for client in list(self._clients):
            if client.backlog:
                rows = client.backlog[:BACKLOG_ROWS_PER_FRAME]
                del client.backlog[:BACKLOG_ROWS_PER_FRAME]
                client.outbox += wire.Steps.encode_rows(os.getpid(), rows, time.time())

    def _broadcast_new_rows(self) -> None:
        rows = self._rows_after(self._sent_upto)
        if rows:
            self._sent_upto = rows[-1][wire.COLUMN["step"]]
            encoded = [wire.encode_row(row) for row in rows]
            self._sent_rows.extend(encoded)
            if self._record_rows is not None:
                stopped = self._record_rows(rows[0][wire.COLUMN["step"]], encoded)
                if stopped is not None:
                    self._broadcast(stopped.encode())
            catching_up = [c for c in self._clients if c.backlog]
            for client in catching_up:  # after their backlog, never before it
                client.backlog += encoded
            if len(catching_up) < len(self._clients):
                frame = wire.Steps.encode_rows(os.getpid(), encoded, time.time())
                self._broadcast(frame, skip=catching_up)
        for frame in self._take_frames():
            self._broadcast(frame)

    def _drop_stalled(self) -> None:
        """Drop the clients that read nothing of what waits for them for UNREAD_DROP_S
        (checked before each send: an honest monitor has read the last one by then)."""
        now = time.monotonic()
        for client in list(self._clients):
            unread = _unread_bytes(client.sock)
            read = client.sent_bytes - unread
            if (unread or client.outbox) and read == client.read_bytes:
                client.stalled_since = client.stalled_since or now
                if now - client.stalled_since >= UNREAD_DROP_S:
                    self._count(f"a client that read nothing for {UNREAD_DROP_S:g} s")
                    self._drop(client, left=False)
            else:
                client.stalled_since = None
            client.read_bytes = read

    def _count(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def _tell_refusals(self) -> None:
        """A notice per reason whose count grew, at most one per REFUSALS_TOLD_EVERY_S: the
        user learns that someone is knocking without a flood of notices."""
        now = time.monotonic()
        if now < self._next_refusals_told or not self._clients:
            return
        for reason, count in self.refused.items():
            told = self._refusals_told.get(reason, 0)
            if count > told:
                self._refusals_told[reason] = count
                self._next_refusals_told = now + REFUSALS_TOLD_EVERY_S
                text = f"hook refused or dropped {count - told} client(s): {reason}"
                self._broadcast(wire.Notice(text, pid=os.getpid()).encode())

    def _broadcast(self, frame: bytes, skip: list[_Client] | None = None) -> None:
        for client in list(self._clients):
            if skip and client in skip:
                continue
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
            except OSError:  # it hung up: what it sent before is still to be read
                self._read_rest(client)
                self._drop(client)
                return
            client.sent_bytes += sent
            del client.outbox[:sent]

    def _read_rest(self, client: _Client) -> None:
        """Take the commands a client sent before it hung up (a one-shot client sends one
        command and closes: it was dropped unread when its hello could not be sent)."""
        while client in self._clients:
            try:
                data = client.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            self._take(client, data)

    def _drop(self, client: _Client, left: bool = True) -> None:
        """``left``: the monitor is gone (its socket closed or broke), so its waiting changes
        and trials go with it. A client the hook drops for being slow (``left=False``: it read
        nothing, or said nothing, for seconds) may be a live monitor starved of CPU, whose
        trial must stay: beside two CPU hogs the niced monitor of the CPU autopilot's test was
        dropped mid-trial and its trial undone (2026-11-27)."""
        if client in self._clients:
            self._clients.remove(client)
            with contextlib.suppress(Exception):
                self._selector.unregister(client.sock)
            _release(client.sock, client.identity)
            if left:
                self._left(client)

    def _left(self, client: _Client) -> None:
        """Tell the agent: the client's waiting changes and trials go with it."""
        if self._on_leave is not None:
            try:
                self._on_leave(client.number)
            except Exception:
                self.errors += 1

    def _close(self) -> None:
        for client in list(self._clients):
            self._drop(client)
        with contextlib.suppress(Exception):
            self._selector.unregister(self._server)
        _release(self._server, self._server_id)
        for end, ident in zip((self._wake_read, self._wake_write), self._wake_ids, strict=True):
            _release(end, ident)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


OTHER_USER = "another user's connection"


def held_high(sock: socket.socket) -> socket.socket:
    """``sock`` on a descriptor at HIGH_FD or above (close-on-exec), its low one closed: a
    job that reuses low descriptors never meets ours. Where no high one is free, as it is."""
    high = _high_copy(sock.fileno())
    if high is None:
        return sock
    moved = socket.socket(sock.family, sock.type, sock.proto, fileno=high)
    moved.settimeout(sock.gettimeout())
    sock.close()
    return moved


def held_fd(fd: int) -> int:
    """``fd`` moved as ``held_high`` moves a socket (the low one closed)."""
    high = _high_copy(fd)
    if high is None:
        return fd
    os.close(fd)
    return high


def _high_copy(fd: int) -> int | None:
    """A close-on-exec copy of ``fd`` at HIGH_FD or above (half the descriptor limit where
    that is lower), or None where it is high already or none is free."""
    try:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        floor = HIGH_FD if limit == resource.RLIM_INFINITY else min(HIGH_FD, limit // 2)
        if fd >= floor:
            return None
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except (OSError, ValueError, AttributeError):
        return None


def _identity(sock: socket.socket) -> tuple[int, int] | None:
    """What the descriptor of ``sock`` is now (device, inode), or None if it is closed."""
    try:
        info = os.fstat(sock.fileno())
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino)


def _release(sock: socket.socket, identity: tuple[int, int] | None) -> None:
    """Close ``sock`` if its descriptor is still what we opened; else let it go unclosed (the
    job closed ours and the number may be its file now)."""
    if identity is not None and _identity(sock) == identity:
        with contextlib.suppress(OSError):
            sock.close()
    else:
        with contextlib.suppress(OSError):
            sock.detach()


_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _unread_bytes(sock: socket.socket) -> int:
    """What the peer has not read of what we sent (0 where the system cannot say)."""
    if ioctl is None:
        return 0
    try:
        return int(struct.unpack("i", ioctl(sock.fileno(), TIOCOUTQ, b"\0" * 4))[0])
    except (OSError, ValueError):
        return 0


def _same_user(sock: socket.socket) -> bool:
    """The peer runs as us (or as root). The 0700 directory already keeps others out; this
    holds should its mode ever be loosened."""
    uid = peer_uid(sock)
    return uid is None or uid in (os.getuid(), 0)


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid (SO_PEERCRED), or None where the system has no such
    option (macOS: the directory's mode is the check there)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        _, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))
    except OSError:
        return -1  # unknown: never one of ours
    return int(uid)
