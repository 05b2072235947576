"""What a panel is: a widget that shows part of a view, at its own refresh tier.

The app takes one view per tick (built off the UI thread) and hands it to every panel whose
tier is due and whose tab is shown (hidden panels pause). A panel never samples, never calls
the session: all it draws comes from the view and the UI state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...views import View

# Every tick (the --refresh period, 2 Hz by default): figures that move with each step.
FAST = "fast"
# Every second tick: data that changes once a second (process samples, chart buckets, the
# clock), drawn together in one frame (every frame costs the compositor a pass).
SLOW = "slow"


@dataclass(frozen=True)
class UiState:
    """What the app knows beside the view: the job, and the user's choices."""

    job_pid: int | None
    paused: bool
    chart_window: str  # "1 min"
    replay_status: str | None


class Panel:
    """Mixin for widgets that show a view. ``tab`` is set where the layout places it (None:
    on every tab); ``NEEDS_CHARTS``/``NEEDS_PHASES`` ask for the costlier parts of a view."""

    TIER: ClassVar[str] = FAST
    NEEDS_CHARTS: ClassVar[bool] = False
    NEEDS_PHASES: ClassVar[bool] = False
    tab: str | None = None
    drawn_key: object = None  # the key of the view drawn last (the app keeps it)

    def show_view(self, view: View, ui: UiState) -> None:
        raise NotImplementedError

    def key(self, view: View, ui: UiState) -> object:
        """What the panel draws from, cheap to compare: a view of the same key as the one
        drawn last is not drawn again (building a panel's text costs far more than comparing
        its inputs). None: drawn every time its tier is due."""
        return None
