"""The attack run of issue 13, repeatable: bad clients on a live job's hook socket.

Each attack is a function of the socket path and a duration; it keeps attacking for that
long (reconnecting when the hook cuts it off) and returns what happened. tests/test_attacks.py
runs every attack against a live CPU job and checks that the job and its listener survive
with bounded memory. Run as a script, this measures what each attack costs the job: the
median step time before, during and after, from the job's own clock.

    python -m benchmarks.frontends.attacks [--seconds 4] [--only NAME ...]

Issue 39's side-by-side run of the far-step changes (``--far-steps``, docs/security.md) is
``git show 045b02a:benchmarks/frontends/attacks.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.paths import REPO
from benchmarks.common.steps import step_ends
from gputop_train import wire
from gputop_train.job.launched import hook_environment
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session

LOOPS = REPO / "tests" / "scenarios" / "loops.py"


@dataclass
class Outcome:
    """What an attack did: connections made, how many the hook ended, bytes sent, and how
    many the hook was serving (it had sent them a hello) when the attack ended."""

    connections: int = 0
    cut_off: int = 0
    sent_bytes: int = 0
    served_at_end: int = 0
    sent_frames: int = 0  # whole frames handed to the socket (far_step_changes)


class _Client:
    """One attacking connection; ``send`` says False once the hook has closed it."""

    def __init__(self, path: Path, outcome: Outcome, receive_buffer: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if receive_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(1.0)  # the hook's queue may be full: it takes 4 a second
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.outcome = outcome
        self.open = True
        self.served = False  # the hook sent something: it accepted us
        outcome.connections += 1

    def send(self, data: bytes) -> bool:
        """Send what the socket takes now; False when the hook has closed the connection."""
        if not self.open:
            return False
        try:
            self.outcome.sent_bytes += self.sock.send(data)
        except BlockingIOError:
            pass
        except OSError:  # EPIPE, ECONNRESET: cut off
            self._cut()
        return self.open

    def drain(self) -> bool:
        """Read what the hook sent (as a monitor would); False once it has closed."""
        while self.open:
            try:
                data = self.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break  # nothing more for now
            except OSError:
                data = b""
            if not data:
                self._cut()
            else:
                self.served = True
        return self.open

    def _cut(self) -> None:
        if self.open:
            self.open = False
            self.outcome.cut_off += 1
        self.sock.close()

    def close(self) -> None:
        self.open = False
        self.sock.close()


def _until(seconds: float) -> Iterator[None]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield


def _keep_sending(path: Path, seconds: float, lines: Callable[[], bytes]) -> Outcome:
    """One client sends ``lines()`` as fast as the hook takes them; reconnects when cut off."""
    outcome, client = Outcome(), None
    for _ in _until(seconds):
        if client is None or not client.open:
            try:
                client = _Client(path, outcome)
            except OSError:
                time.sleep(0.05)
                continue
        client.drain()
        if not client.send(lines()):
            continue
    if client is not None:
        client.close()
    return outcome


def _frame(**fields: object) -> bytes:
    return json.dumps({"v": wire.VERSION, **fields}).encode() + b"\n"


def nested_json(path: Path, seconds: float) -> Outcome:
    """Deeply nested JSON: RecursionError in the decoder killed the listener."""
    within_limit = b'{"v":1,"type":"set_knob","value":' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    over_limit = b'{"v":1,"type":"x","deep":' + b"[" * 100_000 + b"\n"
    return _keep_sending(path, seconds, lambda: within_limit + over_limit)


def non_finite_values(path: Path, seconds: float) -> Outcome:
    """±Infinity and 1e400 as knob values, NaN as a request id: killed the listener or the
    hook on the training thread."""
    lines = (
        b'{"v":1,"type":"set_knob","name":"width","value":Infinity,"id":1}\n'
        b'{"v":1,"type":"set_knob","name":"width","value":-Infinity,"id":2}\n'
        b'{"v":1,"type":"set_knob","name":"width","value":1e400,"id":3}\n'
        b'{"v":1,"type":"set_knob","name":"width","value":64,"id":NaN}\n'
    )
    return _keep_sending(path, seconds, lambda: lines)


def poisoned_history(path: Path, seconds: float) -> Outcome:
    """Big names, values and ids echoed into the knob history sent in every hello."""
    big = "x" * 2_000_000
    medium = "y" * 10_000
    lines = b"".join(
        [
            _frame(type=wire.SET_KNOB, name=big, value=1, id=1),
            _frame(type=wire.SET_KNOB, name=medium, value=1, id=2),
            _frame(type=wire.SET_KNOB, name="width", value=medium, id=3),
            _frame(type=wire.SET_KNOB, name="width", value=128, id=medium),
        ]
    )
    return _keep_sending(path, seconds, lambda: lines)


def malformed_flood(path: Path, seconds: float) -> Outcome:
    """Malformed lines as fast as the socket takes them (226k in the attack run)."""
    return _keep_sending(path, seconds, lambda: b"this is not json\n" * 4096)


def endless_line(path: Path, seconds: float) -> Outcome:
    """Megabytes without a newline (100 MB in the attack run)."""
    return _keep_sending(path, seconds, lambda: b"z" * 65536)


def scan_syncs_flood(path: Path, seconds: float) -> Outcome:
    """Valid commands, too many of them (200k scan_syncs in the attack run)."""
    return _keep_sending(path, seconds, lambda: _frame(type=wire.SCAN_SYNCS) * 1000)


def idle_connections(path: Path, seconds: float, count: int = 2000) -> Outcome:
    """Thousands of connections that say nothing (2000 took the job to 3.8 GB)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    outcome, clients = Outcome(), []
    try:
        for _ in range(count):
            try:
                clients.append(_Client(path, outcome))
            except OSError:
                time.sleep(0.001)  # the backlog is full: the hook is refusing at its pace
        for _ in _until(seconds):
            time.sleep(0.25)
            for client in clients:
                client.drain()
        outcome.served_at_end = sum(c.open and c.served for c in clients)
    finally:
        for client in clients:
            client.close()
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return outcome


def trickling_clients(path: Path, seconds: float, count: int = 200) -> Outcome:
    """Many clients each sending a byte at a time (200 in the attack run)."""
    outcome, clients = Outcome(), []
    for _ in range(count):
        with contextlib.suppress(OSError):
            clients.append(_Client(path, outcome))
    for _ in _until(seconds):
        for client in clients:
            client.drain()
            client.send(b"{")
        time.sleep(0.01)
    outcome.served_at_end = sum(c.open and c.served for c in clients)
    for client in clients:
        client.close()
    return outcome


def never_reading(path: Path, seconds: float, count: int = 20) -> Outcome:
    """Clients with a tiny receive buffer that never read what the hook sends them."""
    outcome, clients = Outcome(), []
    for _ in range(count):
        with contextlib.suppress(OSError):
            clients.append(_Client(path, outcome, receive_buffer=4096))
    for _ in _until(seconds):
        time.sleep(0.25)
    for client in clients:
        client.close()
    return outcome


def reconnect_storm(path: Path, seconds: float) -> Outcome:
    """Connect and hang up as fast as possible: each connection used to cost a hello and
    the whole backlog."""
    outcome = Outcome()
    for _ in _until(seconds):
        with contextlib.suppress(OSError):
            _Client(path, outcome).close()
    return outcome


def far_step_changes(path: Path, seconds: float, count: int = 100_000) -> Outcome:
    """Valid set_knob frames for a far step, each client within its budget (a burst of 200,
    then it hangs up and connects again): half for step 10**15 (refused: past the horizon),
    half for a step within it (held until the bounds refuse more, dropped when the client
    leaves). Issue 39: 100,000 queued for ever took a job from 142 to ~70 steps/s."""
    outcome, sent = Outcome(), 0
    burst = 200  # listener._Client.FRAMES_BURST: the most a client sends and stays served
    for _ in _until(seconds):
        if sent >= count:
            break
        try:
            client = _Client(path, outcome)
        except OSError:
            time.sleep(0.05)
            continue
        client.sock.setblocking(True)
        try:
            hello = json.loads(client.sock.makefile("rb").readline())
            near = int(hello.get("step") or 0) + 50_000
            lines = b"".join(
                _frame(type=wire.SET_KNOB, id=i, name="width", value=256,
                       at_step=10**15 if i % 2 else near)
                for i in range(sent, sent + min(burst, count - sent))
            )  # fmt: skip
            client.sock.sendall(lines)
            sent += lines.count(b"\n")
        except (OSError, ValueError):
            pass
        client.close()
    outcome.sent_frames = sent
    return outcome


def control(path: Path, seconds: float) -> Outcome:
    """No attack: the attacker's loop burns a core without touching the socket. What the
    job loses here is the machine's share, not the hook's: the reference for the others."""
    for _ in _until(seconds):
        sum(range(10_000))
    return Outcome()


ATTACKS: dict[str, Callable[[Path, float], Outcome]] = {
    "control": control,
    "nested_json": nested_json,
    "non_finite_values": non_finite_values,
    "poisoned_history": poisoned_history,
    "malformed_flood": malformed_flood,
    "endless_line": endless_line,
    "scan_syncs_flood": scan_syncs_flood,
    "idle_connections": idle_connections,
    "trickling_clients": trickling_clients,
    "never_reading": never_reading,
    "reconnect_storm": reconnect_storm,
    "far_step_changes": far_step_changes,
}


# -- the live job and its honest monitor ---------------------------------------------------


class LiveJob:
    """tests/scenarios/loops.py ``steady`` under the hook, with an honest monitor connected
    (a HookClient polled on a thread, as the TUI's monitor does)."""

    def __init__(self, workdir: Path) -> None:
        self.times_path = workdir / "step_times.bin"
        self.log = (workdir / "job.log").open("w")
        env = {**hook_environment(os.environ)}
        self.process = subprocess.Popen(
            [sys.executable, str(LOOPS), "steady", f"times={self.times_path}"],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        self.path = wire.socket_path(self.process.pid, wire.runtime_dir(create=False))
        self.session = Session()
        self.client = HookClient(self.session, lambda: {self.process.pid}, self.path.parent)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.client.poll(0.05)

    def wait_until_training(self, timeout_s: float = 300.0) -> None:
        """Until 20 steps are seen. The job imports torch as a user's does: 4.3 s of CPU on the
        2-core dev box, over 60 s of wall time beside other work at load 17-23 (2026-11-27)."""
        deadline = time.monotonic() + timeout_s
        while self.session.snapshot(60.0).total_steps < 20:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the job did not start training: {self.log.name}")
            time.sleep(0.1)

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def step_ends(self) -> list[float]:
        """The job's own clock: each step's end, time.perf_counter() in the job."""
        return step_ends(self.times_path)

    def stop(self) -> int:
        self._stop.set()
        self._poller.join(timeout=5)
        self.client.close()
        self.process.send_signal(2)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.log.close()
        return code


def fresh_monitor_sees_steps(path: Path, timeout_s: float = 15.0) -> tuple[bool, int]:
    """Whether a new monitor gets a hello and then new steps from the hook (a refused one
    retries, as HookClient does); and the hello's size in bytes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        decoder, buffer_bytes, hello_size = wire.FrameDecoder(), 0, 0
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(path))
                sock.settimeout(1.0)
                steps_after_hello: set[int] = set()
                until = time.monotonic() + 5.0
                while time.monotonic() < until:
                    data = sock.recv(1 << 20)
                    if not data:
                        break
                    buffer_bytes += len(data)
                    for frame in decoder.feed(data):
                        if frame["type"] == wire.HELLO:
                            hello_size = len(wire.encode(wire.HELLO, **frame))
                        elif frame["type"] == wire.STEPS and hello_size:
                            steps_after_hello |= {row[0] for row in frame["rows"]}
                    if len(steps_after_hello) > 1:
                        return True, hello_size
        except OSError:
            pass
        time.sleep(0.5)
    return False, 0


# -- the benchmark -----------------------------------------------------------------------


def _median_step_ms(ends: list[float], start: float, stop: float) -> float | None:
    inside = [b - a for a, b in itertools.pairwise(ends) if start <= a and b <= stop]
    return statistics.median(inside) * 1000 if len(inside) >= 5 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="each phase's length")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all attacks")
    parser.add_argument("--only", nargs="*", choices=sorted(ATTACKS), help="these attacks")
    args = parser.parse_args()
    names = args.only or list(ATTACKS)
    ratios: dict[str, list[float]] = {name: [] for name in names}
    worst: dict[str, tuple[float, int, int, bool]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        os.environ[wire.RUNTIME_DIR_ENV] = str(Path(scratch) / "run")
        job = LiveJob(Path(scratch))
        job.wait_until_training()
        rss_start = job.rss_bytes()
        try:
            for round_index in range(args.rounds):
                for name in names:
                    ratio, grown, outcome, alive = _attack_once(job, name, args.seconds)
                    ratios[name].append(ratio)
                    before = worst.get(name, (0.0, 0, 0, True))
                    worst[name] = (
                        max(before[0], grown),
                        before[1] + outcome.cut_off,
                        before[2] + outcome.connections,
                        before[3] and alive,
                    )
                    print(f"round {round_index + 1} {name}: {ratio:.3f}", file=sys.stderr)
        finally:
            rss_end = job.rss_bytes()
            job.stop()
    print(
        f"{'attack':<20} {'during/before':>13} {'range':>13} {'RSS +MB':>8} "
        f"{'cut off':>11} listener"
    )
    for name in names:
        values = sorted(ratios[name])
        grown, cut, made, alive = worst[name]
        print(
            f"{name:<20} {statistics.median(values):13.3f} "
            f"{values[0]:6.3f}-{values[-1]:<6.3f} {grown / 2**20:8.1f} "
            f"{cut:>5}/{made:<5} {'alive' if alive else 'DEAD'}"
        )
    print(f"job RSS over the whole run: {(rss_end - rss_start) / 2**20:+.1f} MB")


def _attack_once(job: LiveJob, name: str, seconds: float) -> tuple[float, int, Outcome, bool]:
    """One attack between a quiet phase before and after: the median step time during over
    before (the job's own clock), the RSS growth, what the attack did, the listener alive."""
    time.sleep(1.0)
    # time.perf_counter is CLOCK_MONOTONIC: the job's clock and ours agree.
    t0, rss0 = time.perf_counter(), job.rss_bytes()
    time.sleep(seconds)
    t1 = time.perf_counter()
    outcome = ATTACKS[name](job.path, seconds)
    t2, rss1 = time.perf_counter(), job.rss_bytes()
    alive, _ = fresh_monitor_sees_steps(job.path)
    ends = job.step_ends()
    before, during = _median_step_ms(ends, t0, t1), _median_step_ms(ends, t1, t2)
    ratio = during / before if during and before else float("nan")
    return ratio, rss1 - rss0, outcome, alive


if __name__ == "__main__":
    main()
