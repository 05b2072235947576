"""A stalled job explained: when no rank has finished a step for a while, what each is doing.

Each rank's hook is asked which collective its training thread waits in (answered from the
hook's own thread: the training thread may be the stuck one), and py-spy dumps each rank's
Python stacks. Both go into a folder beside the session's recording; the session gets a
``stall`` reading (recorded, replayed) from which the view names the ranks that did not
arrive: those in no collective while the others wait in one (advise/stall.py).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import events, wire
from ..advise.stall import other_nodes_ranks
from ..collect.stacks import find_py_spy
from ..session.model import Session
from .hook_client import HookClient

# How long the hooks get to answer where they wait (their listener sends every ~0.5 s).
ANSWER_WAIT_S = 3.0
# One py-spy dump of a process: start-up and one stack walk; more means it cannot read it.
DUMP_TIMEOUT_S = 20.0


class StallWatch:
    """Ticks once a second: after ``after_s`` with no rank's step, dumps once per stall."""

    def __init__(
        self,
        session: Session,
        client: HookClient,
        folder: Callable[[int], Path],
        after_s: float | None,
        py_spy: str | None = None,
    ) -> None:
        self._session = session
        self._client = client
        self._folder = folder
        self.after_s = after_s
        self._py_spy = py_spy or find_py_spy()
        self._dumped_at_step_t: float | None = None  # the stall already dumped (its last step)
        self.last: dict[str, Any] | None = None  # the latest dump's reading
        self._count = 0
        self._lock = threading.Lock()

    def tick(self) -> None:
        if self.after_s is None or not self._session.job_running():
            return
        latest = self._session.last_steps()
        if not latest:
            return
        last_t = max(step.t for step in latest.values())
        if time.time() - last_t >= self.after_s and self._dumped_at_step_t != last_t:
            self._dumped_at_step_t = last_t
            self.dump()
        elif self._dumped_at_step_t is not None and last_t > self._dumped_at_step_t:
            self._dumped_at_step_t = None
            self._session.apply(events.ReadingTaken("stall", {"resolved": True, "at": time.time()}))

    def dump(self) -> Path:
        """Ask every hook where it waits, dump every rank's stacks, write them; the folder."""
        with self._lock:
            self._count += 1
            folder = self._folder(self._count)
        asked = time.time()
        self._client.send(wire.WhereWaiting().encode())
        pids = {p.pid for p in self._session.hooked_processes() if p.connected}
        deadline = time.monotonic() + ANSWER_WAIT_S
        while time.monotonic() < deadline and not all(self._answer(pid, asked) for pid in pids):
            time.sleep(0.1)
        folder.mkdir(parents=True, exist_ok=True)
        latest = self._session.last_steps()
        ranks = []
        for process in sorted(
            self._session.hooked_processes(), key=lambda p: (p.rank is None, p.rank or 0, p.pid)
        ):
            waiting = self._answer(process.pid, asked)
            last = latest.get(process.pid)
            entry = {
                "pid": process.pid,
                "rank": process.rank,
                "host": process.host,
                "connected": process.connected,
                "step": last.step if last else None,
                "step_t": last.t if last else None,
                "answered": waiting is not None,
                "collective": waiting.collective if waiting else None,
                "since": waiting.since if waiting else None,
            }
            label = f"rank-{process.rank}" if process.rank is not None else f"pid-{process.pid}"
            stack = self._stacks(process.pid) if process.connected else "(process gone)"
            (folder / f"{label}.txt").write_text(_rank_text(entry, stack))
            ranks.append(entry)
        stalled_s = asked - max((s.t for s in latest.values()), default=asked)
        sizes = [p.world_size for p in self._session.hooked_processes() if p.world_size]
        reading = {
            "at": asked,
            "stalled_s": round(stalled_s, 1),
            "folder": str(folder),
            # The job's ranks (WORLD_SIZE): where this node's monitor sees fewer, the rank that
            # did not arrive may be on another node (advise/stall.py names which ranks).
            "world_size": max(sizes, default=None),
        }
        self.last = {**reading, "ranks": ranks}
        if ranks and not any(r["answered"] for r in ranks):
            # No hook answered: the ranks are exiting (a job's last seconds look like a stall).
            self._session.apply(
                events.NoticeAdded(
                    f"stall: no rank's hook answered (the job may be exiting); stacks in {folder}"
                )
            )
            return folder
        self._session.apply(events.ReadingTaken("stall", {**reading, "ranks": ranks}))
        self._session.apply(
            events.NoticeAdded(f"stall: each rank's stacks and collective written to {folder}")
        )
        return folder

    def _answer(self, pid: int, asked: float) -> wire.Waiting | None:
        frame = self._client.waiting.get(pid)
        return frame if frame is not None and frame.at >= asked - 1.0 else None

    def _stacks(self, pid: int) -> str:
        if self._py_spy is None:
            return "py-spy is not installed (pip install py-spy): no stacks"
        try:
            result = subprocess.run(
                [self._py_spy, "dump", "--pid", str(pid), "--nonblocking"],
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"py-spy dump failed: {error}"
        return result.stdout if result.returncode == 0 else f"py-spy dump failed: {result.stderr}"


def where_line(reading: dict[str, Any] | None, folder: Path) -> str:
    """Where each rank waits, in one line: "rank 0 waits in all_reduce (DDP gradient
    buckets) (last step 41); rank 1 is in no collective (last step 40); stacks in FOLDER"."""
    ranks = (reading or {}).get("ranks") or []
    parts = []
    for entry in ranks:
        where = _where(entry, "did not answer", since=False)
        on = f" on {entry['host']}" if entry.get("host") else ""
        parts.append(f"{_who(entry)}{on} {where} (last step {entry['step']})")
    elsewhere = other_nodes_ranks(reading or {})
    if elsewhere:
        parts.append(f"ranks {', '.join(map(str, elsewhere))} run on other nodes")
    said = "; ".join(parts) or "no rank's hook answered"
    return f"{said}; stacks in {folder}"


def _rank_text(entry: dict[str, Any], stack: str) -> str:
    where = _where(entry, "its hook did not answer", since=True)
    return (
        f"{_who(entry)} (PID {entry['pid']}, host {entry['host']}): last step {entry['step']}, "
        f"{where}\n\n{stack}"
    )


def _who(entry: dict[str, Any]) -> str:
    return f"rank {entry['rank']}" if entry["rank"] is not None else f"PID {entry['pid']}"


def _where(entry: dict[str, Any], silent: str, since: bool) -> str:
    """Where one rank waits, from its hook's answer: ``silent`` where it gave none."""
    if not entry["answered"]:
        return silent
    if entry["collective"]:
        started = f" since {time.ctime(entry['since'])}" if since else ""
        return f"waits in {entry['collective']}{started}"
    return "is in no collective"


def stall_folder(stem: Path | None, pid: int) -> Callable[[int], Path]:
    """Dumps go beside the recording (``<stem>-stall-N``); without one, in the temp dir."""
    if stem is not None and str(stem) != os.devnull:
        return lambda n: Path(f"{stem}-stall-{n}")
    base = Path(tempfile.gettempdir())
    return lambda n: base / f"gputop-train-{pid}-stall-{n}"
