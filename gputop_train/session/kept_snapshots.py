"""The snapshots taken since the session last changed, kept by what they were asked for
(issue 47 point 7). The session counts every event it applies (its generation); a snapshot
asked again with nothing applied since and a window that has not moved (the job has ended,
or the clock stood still) is the one kept, with only what reads the clock taken again.
``Session`` holds one and calls it under its own lock; nothing here locks."""

from __future__ import annotations

from collections.abc import Hashable

from .snapshot import Snapshot


class KeptSnapshots:
    """The last snapshot of each set of arguments (a few: the TUI's ticks with and without
    charts, the findings thread's), all let go when the generation moves."""

    def __init__(self) -> None:
        self._generation = -1
        self._kept: dict[Hashable, tuple[float, Snapshot]] = {}

    def find(self, generation: int, asked: Hashable, end: float) -> Snapshot | None:
        """The snapshot kept for ``asked`` at ``generation`` whose window ended at ``end``."""
        if generation != self._generation:
            self._generation = generation
            self._kept.clear()
            return None
        found = self._kept.get(asked)
        return found[1] if found is not None and found[0] == end else None

    def keep(self, generation: int, asked: Hashable, end: float, snapshot: Snapshot) -> None:
        if generation == self._generation:
            self._kept[asked] = (end, snapshot)
