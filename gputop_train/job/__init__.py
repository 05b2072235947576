"""The job the front ends drive: one we launched (``launched.LaunchedJob``) or one we attached
to by PID (``attached.AttachedJob``), behind one interface; and its output log."""

from __future__ import annotations

from typing import Protocol


class Job(Protocol):
    """What the front ends need of a job, launched or attached."""

    pid: int
    owned: bool  # started by us: Ctrl+C is passed on, and the exit code is known

    def running(self) -> bool: ...

    def wait(self) -> int | None: ...

    def interrupt(self) -> str: ...

    def stop(self) -> None: ...

    def terminate(self) -> str: ...
