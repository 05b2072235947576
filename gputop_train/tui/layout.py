"""Where each panel sits: one entry per tab, one line per panel. A new panel is a class in
tui/panels/ (docs/architecture.md, "Add a panel") and one line here. A tab builds its widgets
from the app's options (the job's log), never from the app: the app imports the layout."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Static

from .boundary import AppOptions
from .panels.knobs import AutopilotPanel, KnobsPanel, PhasesPanel
from .panels.log import LogPanel
from .panels.overview import ChartsPanel, FindingsPanel, GpuPanel, StepsPanel
from .panels.processes import ProcessesPanel


@dataclass(frozen=True)
class Tab:
    id: str
    title: str  # with its key: "1 Overview"
    widgets: Callable[[AppOptions], Iterable[Widget]]


def overview(options: AppOptions) -> Iterable[Widget]:
    yield Horizontal(StepsPanel(id="steps"), GpuPanel(id="gpus"), id="top")
    yield FindingsPanel(id="findings")
    yield ChartsPanel(id="charts")
    yield ProcessesPanel(id="overview-procs")


def processes(options: AppOptions) -> Iterable[Widget]:
    yield ProcessesPanel(id="procs")


def log(options: AppOptions) -> Iterable[Widget]:
    yield LogPanel(options.log, id="joblog")


def knobs(options: AppOptions) -> Iterable[Widget]:
    yield Static(
        "Knobs: ↑↓ choose, enter to change (switches flip); changes apply at the next step "
        "boundary and open a new phase; a starts or stops the autopilot",
        id="knobs-help",
    )
    yield KnobsPanel(id="knob-list")
    yield AutopilotPanel(id="autopilot")
    yield PhasesPanel(id="phases")


TABS: list[Tab] = [
    Tab("overview", "1 Overview", overview),
    Tab("processes", "2 Processes", processes),
    Tab("log", "3 Log", log),
    Tab("knobs", "4 Knobs", knobs),
]
