"""The monitor's side of the wire: finds hook sockets, reads their frames, feeds the session."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import events, wire
from ..session.model import Session

FACTS = tuple(cls.TYPE for cls in events.FACT_FRAMES)  # the kinds a hello's "latest" holds
# How often to look for sockets of new processes (ranks start late, workers never listen).
# Each look wakes this thread and lists the runtime directory: once a second finds a new rank
# within a second.
DISCOVERY_PERIOD_S = 1.0
# A hook that closed on us before its hello refused us (too many monitors, too many
# connections a second: hook/listener.py); ask again this much later, not every discovery.
REFUSED_RETRY_S = 5.0
# A hook whose queue of connections is full (a client flooding it) would block connect().
CONNECT_TIMEOUT_S = 0.5
# How often the monitor tells each hook it is there (wire.ALIVE): a hook with every slot taken
# gives a slot silent for 3 of these (listener.SILENT_EVICT_S) to a new monitor.
ALIVE_PERIOD_S = 5.0
# A frame read this long after the hook sent it (it sends every 0.5 s, wire.SEND_PERIOD_S)
# means this monitor is behind the job: the status lines say by how much (issue 39: a niced
# monitor lagged 20-90 s on a loaded 2-core box with nothing said).
BEHIND_SAY_S = 2.0
BEHIND = "behind"  # the reading's name: {"pid", "s", "steps"}
# A read's buffer. A hook sends a few KB every 0.5 s; a 1 MiB buffer cost a fresh allocation
# (an mmap, then page faults) on every read.
RECV_BYTES = 65536


class _Connection:
    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.decoder = wire.FrameDecoder()
        self.said_hello = False
        self.said_bye = False
        self.refusal: str | None = None  # the notice of a hook that turned us away
        # Its hook appends its own rows below this step to our recording (hook/row_log.py):
        # we record the rest; None: it appends none (we record every row).
        self.recorded_below: int | None = None
        self.behind = False  # its frames were read late (a status says how far)
        self.steps_per_s = 0.0  # its rate over the last frame of several rows


class HookClient:
    """Connects to every watched PID that has a hook socket; one thread calls ``poll``."""

    def __init__(
        self,
        session: Session,
        candidate_pids: Callable[[], set[int]],
        directory: Path | None = None,
    ) -> None:
        self._session = session
        self._candidate_pids = candidate_pids
        self._directory = directory
        self._selector = selectors.DefaultSelector()
        self._connections: dict[int, _Connection] = {}
        self._finished: set[int] = set()
        self._retry_at: dict[int, float] = {}  # refused: not before this monotonic time
        # Knobs whose --schedule refusal was said when the job's knobs became known: the
        # hook's refusal of the entry at its step is not said again (Monitor.check_schedule).
        self.said_schedule_refusals: set[str] = set()
        self._next_discovery = 0.0
        self._next_alive = 0.0
        self._outgoing: deque[tuple[int | None, bytes]] = deque()
        self._told_undone: set[tuple[int, int | None]] = set()  # trials undone, said once
        self.waiting: dict[int, wire.Waiting] = {}  # each process's latest answer, by PID
        # ``send`` and ``wake`` write a byte here so that ``poll`` need not wake up on a timer
        # to look for work: the thread woke 18.5 times a second, 10 of them for nothing, and a
        # bare Python select loop waking 10 times a second cost 0.12% of a core on the dev box
        # (docs/benchmarks.md §5).
        self._wake_read, self._wake_write = socket.socketpair()
        for end in (self._wake_read, self._wake_write):
            end.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)

    def send(self, frame: bytes, pid: int | None = None) -> None:
        """Queue a frame for one hooked process, or for all (any thread; sent by ``poll``)."""
        self._outgoing.append((pid, frame))
        self.wake()

    def wake(self) -> None:
        """End the ``poll`` in progress now (any thread): a frame to send, or a stop."""
        with contextlib.suppress(OSError):  # full: a wake-up is pending already
            self._wake_write.send(b"\0")

    @property
    def connected_pids(self) -> set[int]:
        return set(self._connections)

    def poll(self, timeout_s: float = DISCOVERY_PERIOD_S) -> None:
        """Look for new sockets when due, send what is queued, then read what arrives for up
        to ``timeout_s`` (less when the next discovery is due sooner; ``wake`` ends it)."""
        now = time.monotonic()
        if now >= self._next_discovery:
            self._discover()
            now = time.monotonic()
            self._next_discovery = now + DISCOVERY_PERIOD_S
        if now >= self._next_alive:
            self._next_alive = now + ALIVE_PERIOD_S
            self._outgoing.append((None, wire.Alive().encode()))
        self._flush_outgoing()
        wait_s = max(0.0, min(timeout_s, self._next_discovery - now))
        for key, _ in self._selector.select(timeout=wait_s):
            if key.data is None:
                self._drain_wakes()
            else:
                self._read(key.data)

    def _drain_wakes(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_read.recv(4096):
                pass

    def _flush_outgoing(self) -> None:
        while self._outgoing:
            pid, frame = self._outgoing.popleft()
            targets = [self._connections[pid]] if pid in self._connections else []
            if pid is None:
                targets = list(self._connections.values())
            for connection in targets:
                self._send_now(connection, frame)

    def _send_now(self, connection: _Connection, frame: bytes) -> None:
        try:
            connection.sock.setblocking(True)
            connection.sock.settimeout(1.0)  # commands are tiny; a hook that cannot take one
            connection.sock.sendall(frame)  # within a second is gone
        except OSError:
            self._disconnect(connection)
        finally:
            with contextlib.suppress(OSError):
                connection.sock.setblocking(False)

    def close(self) -> None:
        for connection in list(self._connections.values()):
            self._disconnect(connection)
        with contextlib.suppress(Exception):
            self._selector.unregister(self._wake_read)
        self._wake_read.close()
        self._wake_write.close()

    def _discover(self) -> None:
        directory = self._directory or wire.runtime_dir(create=False)
        now = time.monotonic()
        for pid in self._candidate_pids() - set(self._connections) - self._finished:
            if self._retry_at.get(pid, 0.0) > now:
                continue
            path = wire.socket_path(pid, directory)
            if not path.exists():
                continue
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                sock.connect(str(path))
            except OSError:
                sock.close()  # stale socket, or the process is just starting: retry later
                continue
            sock.setblocking(False)
            connection = _Connection(pid, sock)
            self._connections[pid] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _read(self, connection: _Connection) -> None:
        data = wire.receive(connection.sock, RECV_BYTES)
        if data is None:
            return
        if not data:
            self._disconnect(connection)
            return
        for frame in connection.decoder.feed(data):
            self._dispatch(connection, frame)
        malformed = connection.decoder.malformed + connection.decoder.unsupported_version
        if malformed:
            self._session.apply(events.FramesDropped(malformed))
            connection.decoder.malformed = connection.decoder.unsupported_version = 0

    def _read_rest(self, connection: _Connection) -> None:
        """Read what a hook sent before it closed on us: a hook that turns a monitor away
        sends its reason and closes at once, often before our first send (an ``alive``), which
        then fails with EPIPE with the reason still unread (the refusal went unsaid, 3 of 3 on
        a quiet box: tests/test_listener_clients.py)."""
        with contextlib.suppress(OSError):
            connection.sock.setblocking(False)
            while not connection.said_hello and (data := connection.sock.recv(RECV_BYTES)):
                for frame in connection.decoder.feed(data):
                    self._dispatch(connection, frame)

    def _dispatch(self, connection: _Connection, raw: dict) -> None:
        """One frame to its handler, by its class; an unknown type or a field of the wrong
        type is counted as dropped."""
        frame = wire.decode_frame(raw)
        handler = _HANDLERS.get(type(frame)) if frame is not None else None
        if handler is not None:
            handler(self, connection, frame)
            return
        item = events.from_frame(connection.pid, frame) if frame is not None else None
        self._session.apply(item if item is not None else events.FramesDropped(1))

    # -- handlers, one per frame the monitor reads (the PID is the socket's, not the frame's) --

    def _on_hello(self, connection: _Connection, frame: wire.Hello) -> None:
        connection.said_hello = True
        # A hook we launched appends its step rows to our recording itself (hook/row_log.py).
        ours = frame.rows_recorded_for == os.getpid()
        stopped = frame.rows_unrecorded_from
        connection.recorded_below = (EVERY_STEP if stopped is None else stopped) if ours else None
        pid, apply = connection.pid, self._session.apply
        apply(events.ProcessHello.from_frame(pid, frame))
        if frame.knobs is not None:
            apply(events.KnobsDeclared.from_frame(pid, frame))
        for outcome in frame.knob_history or ():
            self._on_knob_applied(
                connection, wire.decode_frame({"type": wire.KNOB_APPLIED, **outcome}), quiet=True
            )
        for fact in frame.latest or ():
            if fact.get("type") in FACTS:
                self._dispatch(connection, fact)

    def _on_waiting(self, connection: _Connection, frame: wire.Waiting) -> None:
        """A stall's question, answered (monitor/stall.py reads it)."""
        self.waiting[connection.pid] = frame

    def _on_knob_applied(
        self, connection: _Connection, frame: wire.Frame | None, quiet: bool = False
    ) -> None:
        if not isinstance(frame, wire.KnobApplied):
            self._session.apply(events.FramesDropped(1))
            return
        if isinstance(frame.name, str):  # a refusal echoes whatever name was sent
            self._session.apply(events.KnobOutcome.from_frame(connection.pid, frame))
        scheduled = isinstance(frame.id, str) and frame.id.startswith(wire.SCHEDULE_REQUEST)
        if scheduled and not frame.ok and isinstance(frame.name, str):
            if frame.name in self.said_schedule_refusals:
                quiet = True  # said when the job's knobs became known (Monitor.check_schedule)
            elif not quiet:
                self.said_schedule_refusals.add(frame.name)
        trial_undone = frame.reverted and str(frame.error or "").startswith(wire.MONITOR_LEFT)
        if trial_undone and (connection.pid, frame.seq) not in self._told_undone:
            quiet = False  # the next monitor's hello says it too: nobody else could
            self._told_undone.add((connection.pid, frame.seq))
        if not quiet and not frame.ok:
            self._session.apply(
                events.NoticeAdded(
                    f"knob {frame.name}: {frame.error} (value in force: {frame.value})"
                )
            )

    def _on_steps(self, connection: _Connection, frame: wire.Steps) -> None:
        below, apply = connection.recorded_below, self._session.apply
        if below is None:
            apply(events.StepRows(connection.pid, tuple(frame.rows)))
        else:  # its hook recorded those below ``below``; the rest are ours to record
            held = tuple(row for row in frame.rows if _step_of(row) < below)
            ours = tuple(row for row in frame.rows if _step_of(row) >= below)
            for rows, record in ((held, False), (ours, True)):
                if rows:
                    apply(events.StepRows(connection.pid, rows), record=record)
        if frame.at is not None:
            self._note_lag(connection, time.time() - frame.at, frame.rows)

    def _on_rows_unrecorded(self, connection: _Connection, frame: wire.RowsUnrecorded) -> None:
        """Its hook stopped appending rows to our recording (its notice says why): we record
        them from ``from_step`` on."""
        if connection.recorded_below is not None:
            connection.recorded_below = min(connection.recorded_below, frame.from_step)

    def _note_lag(self, connection: _Connection, lag_s: float, rows: list[Any]) -> None:
        """How far behind the job this monitor reads it (a frame read ``lag_s`` after it was
        sent), as a reading the status lines show: said while over BEHIND_SAY_S, and once
        when caught up again. Live only: a replay is never behind."""
        column = wire.COLUMN["t"]
        with contextlib.suppress(TypeError, IndexError, ZeroDivisionError):
            span = rows[-1][column] - rows[0][column]
            if len(rows) > 1 and span > 0:
                connection.steps_per_s = (len(rows) - 1) / span
        behind = lag_s > BEHIND_SAY_S
        if not behind and not connection.behind:
            return
        connection.behind = behind
        steps = round(max(lag_s, 0.0) * connection.steps_per_s) if behind else 0
        reading = {"pid": connection.pid, "s": round(lag_s, 1) if behind else 0.0}
        self._session.apply(events.ReadingTaken(BEHIND, reading | {"steps": steps}), record=False)

    def _on_notice(self, connection: _Connection, frame: wire.Notice) -> None:
        if not connection.said_hello:  # a notice before any hello says why we are refused
            connection.refusal = frame.text.removeprefix("hook refused this monitor: ")
        self._session.apply(events.NoticeAdded(f"[pid {connection.pid}] {frame.text}"))

    def _on_bye(self, connection: _Connection, frame: wire.Bye) -> None:
        connection.said_bye = True

    def _disconnect(self, connection: _Connection) -> None:
        if not connection.said_hello and connection.pid in self._connections:
            self._read_rest(connection)
        self._connections.pop(connection.pid, None)
        if connection.said_bye:
            self._finished.add(connection.pid)
        with contextlib.suppress(Exception):
            self._selector.unregister(connection.sock)
        connection.sock.close()
        if connection.said_hello:
            self._session.apply(events.ProcessGone(connection.pid))
        else:  # refused (its notice, if any, is in the Log): not again at once
            self._retry_at[connection.pid] = time.monotonic() + REFUSED_RETRY_S
            if connection.refusal is not None:
                self._session.apply(events.HookRefused(connection.pid, connection.refusal))


# A hook that appends every row to our recording appends those below this step.
EVERY_STEP = sys.maxsize


def _step_of(row: object) -> int:
    """A row's step; a malformed row sorts past every step (recorded here, counted by the
    session as dropped)."""
    step = row[0] if isinstance(row, list) and row else None
    return step if type(step) is int else EVERY_STEP


# Each frame the monitor reads that makes several events or changes the connection, to its
# handler; a frame that is one event needs no line here: its event class names it
# (events.FROM_FRAME, docs/architecture.md, "Add a fact"). Never both (tests/test_recipes.py).
_HANDLERS: dict[type[wire.Frame], Callable[[HookClient, _Connection, Any], None]] = {
    wire.Hello: HookClient._on_hello,
    wire.Steps: HookClient._on_steps,
    wire.Notice: HookClient._on_notice,
    wire.Bye: HookClient._on_bye,
    wire.KnobApplied: HookClient._on_knob_applied,
    wire.Waiting: HookClient._on_waiting,
    wire.RowsUnrecorded: HookClient._on_rows_unrecorded,
}
