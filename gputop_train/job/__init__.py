"""The job the front ends drive: one we launched (``launched.LaunchedJob``) or one we attached
to by PID (``attached.AttachedJob``), behind one interface; and its output log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Job(Protocol):
    """What the front ends need of a job, launched or attached."""

    pid: int
    owned: bool  # started by us: Ctrl+C is passed on, and the exit code is known
    # Set by the CLI: say a line to the user; write the stall dump and say where each rank
    # waits (a stop the job does not heed, docs/exits.md).
    tell: Callable[[str], None]
    where_waiting: Callable[[], str | None]

    def running(self) -> bool: ...

    def wait(self) -> int | None: ...

    def interrupt(self) -> str: ...

    def stop(self) -> None: ...

    def terminate(self) -> str: ...
