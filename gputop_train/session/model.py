"""The session: every series of one run in bounded buffers, and immutable snapshots of it.

Samplers and the hook client write from their own threads; front ends (headless printer,
TUI, recorder) call ``snapshot()`` and get one frozen view with the derived figures
computed once, so no front end computes statistics of its own.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import replace as _replace
from typing import Any

from .. import events, wire
from ..samples import GpuSample, ProcSample, StackShares
from . import job_gpus, observe, stats, step_log
from .comm import HOLD_WINDOWS, KeptFigures
from .gpu_tracking import GpuTracking
from .gpu_windows import GpuWindows
from .hooked import HookedProcesses
from .job_end import stop_seen
from .kept_snapshots import KeptSnapshots
from .knob_phases import KnobPhases
from .phases import KnobState, PhaseTable
from .series import ChartBinner, ChartSeries
from .snapshot import Activity, HookedProcess, JobState, Snapshot
from .step_log import StepLog, step_ahead
from .steps import Step

MAX_NOTICES = 200
MAX_PROC_TICKS = 7200  # two hours of 1 Hz process samples
MAX_FACTS = 10_000  # of each kind: one per epoch, scan or knob change; years of those
# The default window for the live figures: long enough to hold several slow steps.
DEFAULT_WINDOW_S = 10.0


@dataclass
class Session:
    command: tuple[str, ...] = ()
    clock: Callable[[], float] = time.time
    started_at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.started_at = self.started_at or self.clock()
        # The parts, each called under the lock: the step rows; every GPU's ticks, the job's
        # apart, and which GPUs are the job's; the hooked processes; the knobs and phases.
        self._log = StepLog(self.started_at)
        self._gpus = GpuTracking()
        self._gpu_windows = GpuWindows()  # each GPU's window figures, kept between snapshots
        self._kept_figures = KeptFigures()  # each step's verdict figures, the same
        self._generation = 0  # events applied: what a kept snapshot was taken at
        self._snapshots = KeptSnapshots()
        self._hooked = HookedProcesses()
        self._knob_phases = KnobPhases(self.started_at)
        self._processes: tuple[ProcSample, ...] = ()
        self._notices: deque[str] = deque(maxlen=MAX_NOTICES)
        self._notice_count = 0
        self._readings: dict[str, dict[str, Any]] = {}
        self._job = JobState()
        self._dropped_frames = 0
        # the fact frames (events.FACT_FRAMES) as they came, by class, with when each was seen
        self._facts: dict[type[wire.Frame], list[tuple[float, wire.Frame]]] = {}
        self._proc_ticks: deque[stats.ProcTick] = deque(maxlen=MAX_PROC_TICKS)
        self._cpu_count: int | None = None
        self.driver: str | None = None
        # Called with every event applied: the recorder's way in.
        self.listener: Callable[[events.Event], None] | None = None
        self._binners: dict[tuple[float, int], ChartBinner] = {}  # per chart window
        self._phase_table = PhaseTable()
        self._stacks: tuple[float, StackShares] | None = None
        self._job_ended_at: float | None = None
        self._autopilot: dict[str, Any] | None = None
        self._stacks_expected: float | None = None  # seconds after start of py-spy's 1st window

    def _tell(self, item: events.Event) -> None:
        if self.listener is not None:
            self.listener(item)

    # -- the one input (any thread) -------------------------------------------------------

    def apply(self, item: events.Event, record: bool = True) -> None:
        """Take one event: tell it to the listener (the recorder), then change the state.
        Informational events (phases, findings) are recorded and change nothing. Not
        ``record``: recorded already (a hook's own step rows, hook/row_log.py)."""
        handler = _HANDLERS.get(type(item))
        if handler is None:
            if not item.informational:
                raise TypeError(f"the session takes no {type(item).__name__} event")
            self._tell(item)
            return
        if record and type(item) is not events.AutopilotChanged:  # told only when it changed
            self._tell(item)
        handler(self, item)
        with self._lock:  # after the change: a snapshot of it taken meanwhile is kept no later
            self._generation += 1

    # -- handlers, one per event (lock taken inside) ----------------------------------------

    def _on_gpus(self, item: events.GpusFound) -> None:
        self.driver = item.driver
        with self._lock:
            self._gpus.found(item)

    def _on_hello(self, item: events.ProcessHello) -> None:
        with self._lock:
            self._hooked.hello(item)

    def _on_refused(self, item: events.HookRefused) -> None:
        with self._lock:
            self._hooked.refused[item.pid] = item.reason

    def _on_disconnected(self, item: events.ProcessGone) -> None:
        with self._lock:
            self._hooked.gone(item.pid)

    def _on_knobs(self, item: events.KnobsDeclared) -> None:
        """The knobs a process advertised (hello or knobs frame); the primary's are shown."""
        with self._lock:
            if item.pid == self._primary_pid_locked():
                self._knob_phases.declared(item.knobs)

    def _on_knob_requested(self, item: events.KnobRequested) -> None:
        with self._lock:
            self._knob_phases.requested(item.name, item.value)

    def _on_knob_outcome(self, item: events.KnobOutcome) -> None:
        """The value in force; a real change opens a phase."""
        with self._lock:
            if item.pid == self._primary_pid_locked():
                for phase in self._knob_phases.outcome(item, self.clock()):
                    self._tell(events.PhaseOpened(asdict(phase)))

    def _on_steps(self, item: events.StepRows) -> None:
        """Append steps from a wire frame; a malformed row counts as a dropped frame."""
        steps, malformed = step_log.parse(item.pid, item.rows)
        with self._lock:
            self._log.take(item.pid, steps)
            self._dropped_frames += malformed

    def _on_gpu(self, item: events.GpuSampled) -> None:
        """One NVML tick; where the job's GPUs changed with it, the charts and phase rows are
        built anew from the job's ticks taken again (session/gpu_tracking.py)."""
        with self._lock:
            hooked = self._hooked.current()
            job_pids = {p.pid for p in self._processes} | {p.pid for p in hooked}
            if self._gpus.sampled(item.samples, job_pids, {p.pid: p.rank for p in hooked}):
                self._binners.clear()
                self._phase_table = PhaseTable()

    def _on_procs(self, item: events.ProcsSampled) -> None:
        """One process sample, and the busy share of all the machine's cores meanwhile. When the
        job's tree is gone, the last sample stays on screen, marked ended."""
        processes = item.samples
        tick = stats.ProcTick.of(self.clock(), processes, item.system_cpu_pct, item.usable_cores)
        with self._lock:
            if not processes and self._processes:
                processes = tuple(
                    _replace(p, status="ended", cpu_pct=None, io_read_bps=None, io_write_bps=None)
                    for p in self._processes
                )
            self._processes = processes
            self._proc_ticks.append(tick)

    def _on_stacks(self, item: events.StacksSampled) -> None:
        with self._lock:
            self._stacks = (self.clock(), item.stacks)

    def _on_stacks_expected(self, item: events.StacksExpected) -> None:
        """A job without the hook: py-spy's first window is due in ``window_s``."""
        with self._lock:
            self._stacks_expected = self.clock() - self.started_at + item.window_s

    def _on_cores(self, item: events.CoresCounted) -> None:
        with self._lock:
            self._cpu_count = item.count

    def _on_fact(self, item: events.FactSeen) -> None:
        """The primary process's fact frames, typed as the wire decoded them, by class."""
        frame = item.frame
        with self._lock:
            if isinstance(frame, wire.Model) and frame.device_uuid:  # every rank's device
                self._gpus.device_reported(item.pid, frame.device_uuid)
            if item.pid == self._primary_pid_locked():
                facts = self._facts.setdefault(type(frame), [])
                facts.append((self.clock(), frame))
                del facts[:-MAX_FACTS]

    def _on_autopilot(self, item: events.AutopilotChanged) -> None:
        """The autopilot's state; the record gets it whenever its state or a trial changes."""
        record = item.status
        with self._lock:
            previous = self._autopilot
            self._autopilot = record
        changed = previous is None or any(
            previous.get(key) != record.get(key) for key in ("state", "trials", "done")
        )
        if changed:
            self._tell(item)

    def _on_notice(self, item: events.NoticeAdded) -> None:
        with self._lock:
            self._notices.append(item.text)
            self._notice_count += 1

    def _on_reading(self, item: events.ReadingTaken) -> None:
        """Kept, recorded and replayed, shown by whichever panel reads it."""
        with self._lock:
            self._readings[item.source] = item.value

    def _on_dropped(self, item: events.FramesDropped) -> None:
        with self._lock:
            self._dropped_frames += item.frames

    def _on_stop(self, item: events.StopAsked) -> None:
        with self._lock:
            self._job = _replace(self._job, stopped_by=item.reason)

    def _on_job_ended(self, item: events.JobEnded) -> None:
        with self._lock:
            self._job = JobState(
                running=False,
                exit_code=item.exit_code,
                stderr_tail=tuple(item.stderr_tail),
                stopped_by=self._job.stopped_by or stop_seen(item.exit_code, item.stderr_tail),
            )
            now = self.clock()
            self._job_ended_at = min(item.at, now) if item.at is not None else now

    # -- readers ------------------------------------------------------------------------

    def hooked_pids(self) -> set[int]:
        with self._lock:
            return set(self._hooked.by_pid)

    def hooked_processes(self) -> list[HookedProcess]:
        with self._lock:
            return list(self._hooked.by_pid.values())

    def last_steps(self) -> dict[int, Step]:
        """Each hooked process's latest step (a stall's evidence: who stopped where)."""
        with self._lock:
            return self._log.latest()

    def job_running(self) -> bool:
        with self._lock:
            return self._job.running

    def process_pids(self) -> set[int]:
        """The PIDs of the last process sample: where the hook client looks for sockets."""
        with self._lock:
            return {p.pid for p in self._processes}

    def system_cpu_pct(self) -> float | None:
        """The machine's busy share of all cores at the last process sample (psutil)."""
        with self._lock:
            return self._proc_ticks[-1].system if self._proc_ticks else None

    def primary_pid(self) -> int | None:
        with self._lock:
            return self._primary_pid_locked()

    def steps_taken(self) -> dict[int, int]:
        """Each process's last step taken (PID -> its step counter): a step at or below it
        is skipped when it comes again."""
        with self._lock:
            return dict(self._log.last_step)

    def _primary_pid_locked(self) -> int | None:
        return self._hooked.primary(self._log.pids)

    def gpu_ticks(self) -> list[tuple[GpuSample, ...]]:
        """The NVML ticks of the job's GPUs (``all_gpu_ticks``: every GPU's)."""
        with self._lock:
            return list(self._gpus.job)

    def all_gpu_ticks(self) -> list[tuple[GpuSample, ...]]:
        with self._lock:
            return list(self._gpus.every)

    def steps(self) -> list[Step]:
        with self._lock:
            return list(self._log.steps)

    def facts(self, kind: type[observe.F]) -> list[observe.F]:
        """The primary process's frames of a fact class (``wire.Loader``, ...), oldest first."""
        with self._lock:
            return [frame for _, frame in self._facts.get(kind, ())]  # type: ignore[misc]

    def common_step(self, ahead_s: float, min_ahead: int, now: float) -> int | None:
        """A step every rank of a multi-process job has still to reach: the furthest step
        any has reported, plus ``ahead_s`` and the steps since its last row (at ``now``) at
        the primary's recent pace (``min_ahead`` at least); None with a single process,
        where a change applies at its next boundary."""
        with self._lock:
            if len(self._log.last_step) < 2:
                return None
            furthest = max(self._log.last_step.values())
            recent = self._log.recent_of(self._primary_pid_locked())
        return step_ahead(furthest, recent, ahead_s, min_ahead, now)

    def knob(self, name: str) -> KnobState | None:
        with self._lock:
            return self._knob_phases.knobs.get(name)

    def snapshot(
        self,
        window_s: float = DEFAULT_WINDOW_S,
        chart_window_s: float = 0.0,
        chart_points: int = 0,
        with_phases: bool = False,
    ) -> Snapshot:
        """Figures over the last ``window_s`` (once the job has ended, the last ``window_s`` of
        its training: the screen keeps the final state); with ``chart_points``, binned chart
        series too; with ``with_phases`` the phase table (a pass over every step: ask only to
        show it)."""
        now = self.clock()
        with self._lock:
            end = self._window_end(now)
            asked = (window_s, chart_window_s, chart_points, with_phases)
            kept = self._snapshots.find(self._generation, asked, end)
            if kept is not None:  # nothing came and the window stood: only the clock moved
                return _replace(
                    kept,
                    t=now,
                    activity=self._activity(now, self._primary_pid_locked()),
                    charts=self._charts(now, chart_window_s, chart_points),
                )
            since = end - window_s
            charts = self._charts(now, chart_window_s, chart_points)
            recent_steps = observe.tail_between(self._log.steps, since, end)
            replaced = self._hooked.replaced()
            if replaced:  # a restart's dead generation adds nothing to the live figures
                recent_steps = [s for s in recent_steps if s.pid not in replaced]
            recent_gpu = observe.ticks_between(self._gpus.job, since, end)
            every_gpu = observe.ticks_between(self._gpus.every, since, end)
            primary = self._primary_pid_locked()
            figures = stats.step_stats(recent_steps, primary)
            processes = self._processes
            series = self._series()
            observation, advice_wait = observe.advice_window(
                series, recent_steps, recent_gpu, since, end, figures
            )
            snapshot = Snapshot(
                t=now,
                started_at=self.started_at,
                command=self.command,
                job=self._job,
                gpu_names=self._gpus.names,
                gpu_uuids=self._gpus.uuids,
                gpu_pci_bus_ids=self._gpus.pci_bus_ids,
                nvml_error=self._gpus.nvml_error,
                hooked=tuple(self._hooked.current()),
                # The job's steps: the primary process's own counter (every rank of a DDP
                # job takes the same steps), which also counts steps before a late connect.
                total_steps=self._log.last_step.get(primary, 0) if primary is not None else 0,
                steps_before_start=self._log.steps_before.get(primary, 0) if primary else 0,
                total_samples=self._log.samples_of_current(replaced),
                window_s=window_s,
                steps=self._window_steps(figures, observation),
                gpu=stats.gpu_stats(recent_gpu, self._gpu_windows),
                procs=stats.proc_stats(processes),
                latest_gpus=self._gpus.every[-1] if self._gpus.every else (),
                processes=processes,
                notices=tuple(self._notices),
                dropped_frames=self._dropped_frames,
                charts=charts,
                knobs=tuple(self._knob_phases.knobs.values()),
                phases=tuple(
                    self._phase_table.rows(
                        self._knob_phases.phases,
                        self._log.steps,
                        self._gpus.job,
                        primary,
                        functools.partial(observe.observe_measured, series),
                    )
                )
                if with_phases
                else (),
                observation=observation,
                phase=len(self._knob_phases.phases),
                stacks=self._stacks[1] if self._stacks else None,
                advice_wait=advice_wait,
                autopilot=self._autopilot,
                notice_count=self._notice_count,
                readings=dict(self._readings),
                activity=self._activity(now, primary),
                run_steps=None if self._job.running else self._log.run_stats(primary),
                ranks=self._rank_stats(
                    recent_steps,
                    self._known_figures(primary, figures),
                    self._held_steps(end, window_s, replaced),
                ),
                ended_at=None if self._job.running else self._job_ended_at,
                memory=observe.fact_at(series, wire.MemoryAudit, end),
                step_parts_fact=observe.fact_at(series, wire.StepParts, end),
                job_gpus=self._gpus.chosen,
                gpus=job_gpus.gpu_figures(every_gpu, self._gpus.chosen, self._gpu_windows),
            )
            self._snapshots.keep(self._generation, asked, end, snapshot)
        return snapshot

    def _charts(self, now: float, window_s: float, points: int) -> ChartSeries | None:
        """The binned chart series, where asked for (lock held)."""
        if not points:
            return None
        binner = self._binners.setdefault((window_s, points), ChartBinner(window_s, points))
        return binner.series(self._log.steps, self._gpus.job, now, self._primary_pid_locked())

    def _window_end(self, now: float) -> float:
        """Where live windows end: now while the job runs; after it, at its last step."""
        if self._job.running:
            return now
        if self._log.steps:
            return min(now, self._log.steps[-1].t)
        return min(now, self._job_ended_at or now)

    def _activity(self, now: float, primary: int | None) -> Activity | None:
        """What the job is doing while it has made no step (lock held; views says it)."""
        if primary is not None and self._log.last_step.get(primary, 0) > 0:
            return None
        elapsed = now - self.started_at
        due = self._stacks_expected
        return Activity(
            elapsed_s=elapsed,
            running=self._job.running,
            exit_code=self._job.exit_code,
            stacks_due_s=max(0.0, due - elapsed) if self._stacks is None and due else None,
            stacks_shown=self._stacks is not None,
            hooked=tuple(sorted(self._hooked.by_pid)),
            refused=next(iter(self._hooked.refused.items()), None),
        )

    def _series(self) -> observe.Series:
        """The series an observation reads (lock held)."""
        return observe.Series(
            primary=self._primary_pid_locked(),
            phases=self._knob_phases.phases,
            last_step=self._log.last_step,
            gpu=self._gpus.job,
            proc_ticks=self._proc_ticks,
            facts=self._facts,
            stacks=self._stacks,
            hooked=len(self._hooked.by_pid),
            world_size=self._hooked.world_size(),
            gpu_names=self._gpus.names,
            cpu_count=self._cpu_count,
            rank_stats=self._rank_stats,
            job_gpus=self._gpus.chosen,
            workers_max=self._knob_phases.workers_max(),
            over_window=self._gpu_windows,
        )

    def _known_figures(
        self, primary: int | None, figures: stats.StepStats
    ) -> dict[int, stats.StepStats]:
        """With one process, its row is the window's figures: the same steps, computed once
        (lock held)."""
        return {primary: figures} if primary is not None and self._log.pids == {primary} else {}

    def _held_steps(self, end: float, window_s: float, replaced: set[int]) -> list[Step] | None:
        """With several processes, the steps of the last HOLD_WINDOWS windows: the span over
        which a straggler's lag must hold (session/comm.py). Lock held."""
        if len(self._hooked.by_pid) < 2:
            return None
        steps = observe.tail_between(self._log.steps, end - HOLD_WINDOWS * window_s, end)
        return [s for s in steps if s.pid not in replaced] if replaced else steps

    def _rank_stats(
        self,
        steps: Sequence[Step],
        known: dict[int, stats.StepStats] | None = None,
        held_steps: Sequence[Step] | None = None,
    ) -> tuple[stats.RankStats, ...]:
        """Per hooked process, its figures over ``steps`` (or ``known``'s, by PID), its
        waits over ``held_steps`` and its totals (lock held)."""
        return stats.rank_stats(
            steps,
            [
                stats.RankIdentity(p.pid, p.rank, p.local_rank, p.host)
                for p in self._hooked.current()
            ],
            self._log.last_step,
            self._log.samples_by_pid,
            self._gpus.rank_gpus(),
            known,
            held_steps,
            self._kept_figures,
        )

    @staticmethod
    def _window_steps(
        figures: stats.StepStats, observation: stats.Observation | None
    ) -> stats.StepStats:
        """The step figures shown: the window's; a job without the hook, py-spy's data-wait."""
        if observation is not None and observation.data_wait_source == "py-spy":
            return observation.steps
        return figures


# Each event's handler: the session's whole input, in one table.
_HANDLERS: dict[type[events.Event], Callable[[Session, Any], None]] = {
    events.GpusFound: Session._on_gpus,
    events.ProcessHello: Session._on_hello,
    events.ProcessGone: Session._on_disconnected,
    events.KnobsDeclared: Session._on_knobs,
    events.KnobRequested: Session._on_knob_requested,
    events.KnobOutcome: Session._on_knob_outcome,
    events.StepRows: Session._on_steps,
    events.GpuSampled: Session._on_gpu,
    events.ProcsSampled: Session._on_procs,
    events.StacksSampled: Session._on_stacks,
    events.StacksExpected: Session._on_stacks_expected,
    events.CoresCounted: Session._on_cores,
    events.FactSeen: Session._on_fact,
    events.AutopilotChanged: Session._on_autopilot,
    events.NoticeAdded: Session._on_notice,
    events.HookRefused: Session._on_refused,
    events.ReadingTaken: Session._on_reading,
    events.FramesDropped: Session._on_dropped,
    events.StopAsked: Session._on_stop,
    events.JobEnded: Session._on_job_ended,
}
