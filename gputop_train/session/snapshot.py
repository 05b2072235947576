"""What the session hands a front end: one frozen ``Snapshot`` of the run at an instant, and
the small records it holds of the job and its hooked processes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import wire
from ..samples import GpuSample, ProcSample, StackShares
from . import stats
from .job_gpus import GpuFigures, JobGpus
from .phases import KnobState, PhaseRow
from .series import ChartSeries


@dataclass(frozen=True)
class HookedProcess:
    """A training process that the monitor is connected to (from its hello frame)."""

    pid: int
    argv: tuple[str, ...]
    rank: int | None
    torch_version: str | None
    host: str | None
    connected: bool
    local_rank: int | None = None
    world_size: int | None = None


@dataclass(frozen=True)
class JobState:
    running: bool = True
    exit_code: int | None = None
    stderr_tail: tuple[str, ...] = ()
    stopped_by: str | None = None  # a stop asked for (q, Ctrl+C, a closed pipe): not a failure

    @property
    def failed(self) -> bool:
        return not self.running and self.exit_code not in (0, None) and self.stopped_by is None


@dataclass(frozen=True)
class Activity:
    """What the job is doing while it has made no training step: the facts that
    ``views.activity_note`` says in words (the screen explains itself as it happens)."""

    elapsed_s: float  # since the monitor started
    running: bool = True
    exit_code: int | None = None
    # py-spy's first window of a job without the hook is due in this many seconds; None:
    # none awaited (a hooked job, or a window already seen: ``stacks_shown``).
    stacks_due_s: float | None = None
    stacks_shown: bool = False
    hooked: tuple[int, ...] = ()  # the hooked PIDs, in order
    refused: tuple[int, str] | None = None  # a PID whose hook turned this monitor away, why


@dataclass(frozen=True)
class Snapshot:
    """Everything a front end draws, at one instant. Immutable: safe to hand across threads."""

    t: float
    started_at: float
    command: tuple[str, ...]
    job: JobState
    gpu_names: tuple[str | None, ...]
    nvml_error: str | None
    hooked: tuple[HookedProcess, ...]
    total_steps: int
    total_samples: int | None
    window_s: float
    steps: stats.StepStats
    gpu: stats.GpuStats
    procs: stats.ProcStats
    latest_gpus: tuple[GpuSample, ...]
    processes: tuple[ProcSample, ...]
    notices: tuple[str, ...]  # the last MAX_NOTICES
    dropped_frames: int
    charts: ChartSeries | None = None
    knobs: tuple[KnobState, ...] = ()
    phases: tuple[PhaseRow, ...] = ()
    # What the advisor judges: the current phase's measured steps in the window, with the GPU
    # and CPU figures of the time they ran. None while there are too few (``advice_wait``).
    observation: stats.Observation | None = None
    phase: int = 1  # the number of the phase now running
    stacks: StackShares | None = None  # the latest py-spy window, for a job without the hook
    advice_wait: str | None = None  # why there is no observation yet
    # The autopilot's (or --try's) state and trial table, as plain data; None when off.
    autopilot: dict[str, Any] | None = None
    notice_count: int = 0  # notices ever made: new ones are those past the count last shown
    readings: dict[str, dict[str, Any]] = field(default_factory=dict)  # latest per sampler
    # Who each GPU is (index order), as dcgm-exporter labels it: UUID and PCI bus id.
    gpu_uuids: tuple[str | None, ...] = ()
    gpu_pci_bus_ids: tuple[str | None, ...] = ()
    # The job's GPUs and why (session/job_gpus.py); every GPU's figures over the window,
    # the job's and the others (marked), in index order.
    job_gpus: JobGpus | None = None
    gpus: tuple[GpuFigures, ...] = ()
    # What the job is doing while it has made no step; None once it has.
    activity: Activity | None = None
    # The same in words ("waiting for the first training step (12 s): ..."), written by
    # views.view_of from ``activity`` (presentation lives in views): read it from a view.
    activity_note: str | None = None
    # The primary process's steps made before this monitor started (an attach, a replay of
    # one): total_steps counts from the job's start, the elapsed time from the monitor's.
    steps_before_start: int = 0
    run_steps: stats.StepStats | None = None  # the whole run's figures, once the job ended
    # Each hooked process's own figures over the window, by rank (torchrun), then PID.
    ranks: tuple[stats.RankStats, ...] = ()
    ended_at: float | None = None  # when the job ended (Unix s); None while it runs
    # The hook's latest memory audit, and its step_parts fact: the module whose forwards
    # are counted and timed, or why none is (docs/steps.md).
    memory: wire.MemoryAudit | None = None
    step_parts_fact: wire.StepParts | None = None

    @property
    def elapsed_s(self) -> float:
        """The run's duration so far; once the job has ended, its whole run (the clock stops
        with the job, however long the screen stays open)."""
        return (self.ended_at if self.ended_at is not None else self.t) - self.started_at
