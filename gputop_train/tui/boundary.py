"""What only the TUI asks of the rest of the program: a replay's timeline and one options
object.

The app never sees a Monitor or a ReplayController: it is handed a snapshot source and the
controls of a live job (the monitor implements them), the protocols every front end shares
(front_end.py), or a timeline (a replay implements it, here), and its options. Tests hand it
fakes of the same shapes; ``create_app`` is the one way to build it, for the CLI, the
benchmarks and the tests alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import wire
from ..job.log import LogTail

# One redraw per frame the hook sends (2 Hz): fresh enough to watch a step-time change,
# cheap over SSH; a faster redraw would draw the same figures again.
DEFAULT_REFRESH_S = wire.SEND_PERIOD_S


class RecordingSpan(Protocol):
    @property
    def started_at(self) -> float: ...

    @property
    def ended_at(self) -> float: ...


class Timeline(Protocol):
    """A replay's time cursor: where it is, how fast it moves, and the moves a key makes."""

    @property
    def recording(self) -> RecordingSpan: ...

    @property
    def playing(self) -> bool: ...

    @property
    def cursor(self) -> float: ...

    @property
    def speed(self) -> float: ...

    def toggle(self) -> None: ...

    def seek(self, t: float) -> None: ...

    def faster(self, step: int) -> None: ...


@dataclass(frozen=True)
class AppOptions:
    """How the app shows the job: which job, its log, how often and how much to draw."""

    job_pid: int | None = None
    log: LogTail | None = None
    refresh_s: float = DEFAULT_REFRESH_S
    window_s: float = 10.0
    auto_refresh: bool = True  # off in tests: they post app.take_snapshot() or refresh_data()
    # Where S puts the screen's SVG: the session's files keep it, named after the session and
    # private like them (record/files.save_screenshot); None: this view has no session files.
    save_screenshot: Callable[[str], Path] | None = None
    job_owned: bool = True  # we launched it: quitting may stop it
    # What went wrong at start-up (a Prometheus port in use): said on stderr before the TUI
    # took the screen, shown again as toasts when it opens, whole (the Log tab cuts lines).
    warnings: tuple[str, ...] = ()
