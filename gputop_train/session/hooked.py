"""The session's part that knows the hooked processes: who said hello, who turned the monitor
away and why, which of them a restart replaced, and which one leads (the primary). ``Session``
holds one and calls it under its own lock; nothing here locks."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from .. import events
from .snapshot import HookedProcess


class HookedProcesses:
    def __init__(self) -> None:
        self.by_pid: dict[int, HookedProcess] = {}
        self.refused: dict[int, str] = {}  # PIDs whose hook turned us away, and why

    def hello(self, item: events.ProcessHello) -> None:
        self.by_pid[item.pid] = HookedProcess(
            pid=item.pid,
            argv=item.argv,
            rank=item.rank,
            torch_version=item.torch,
            host=item.host,
            connected=True,
            local_rank=item.local_rank,
            world_size=item.world_size,
        )
        self.refused.pop(item.pid, None)

    def gone(self, pid: int) -> None:
        if pid in self.by_pid:
            self.by_pid[pid] = replace(self.by_pid[pid], connected=False)

    def current(self) -> list[HookedProcess]:
        """The hooked processes less those a restart replaced: a rank whose process is gone
        once a later hello names the same rank (torchrun --max-restarts), so that the new
        rank 0 leads and the dead ones' figures do not stand beside the new ones'."""
        newest = {p.rank: p.pid for p in self.by_pid.values() if p.rank is not None}
        return [
            p
            for p in self.by_pid.values()
            if p.rank is None or p.connected or newest[p.rank] == p.pid
        ]

    def replaced(self) -> set[int]:
        """The processes a restart replaced (a dead generation of ranks)."""
        current = {p.pid for p in self.current()}
        return {pid for pid in self.by_pid if pid not in current}

    def primary(self, step_pids: Collection[int]) -> int | None:
        """The process that leads: the lowest rank, then PID. With steps but no hello (a hook's
        own rows in the recording, of a job whose hook this monitor never reached:
        Monitor.fold_in_recorded_steps, issue 39), the lowest PID that stepped."""
        current = self.current()
        if not current:
            return min(step_pids, default=None)
        return min(current, key=lambda p: (p.rank is None, p.rank or 0, p.pid)).pid

    def world_size(self) -> int | None:
        """The job's ranks, as the hooks' WORLD_SIZE says; None: unknown."""
        return max((p.world_size or 0 for p in self.by_pid.values()), default=0) or None
