"""The session: every series of one run in bounded buffers, and immutable snapshots of it.

Samplers and the hook client write from their own threads; front ends (headless printer,
TUI, recorder) call ``snapshot()`` and get one frozen view with the derived figures
computed once, so no front end computes statistics of its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import replace as _replace
from typing import Any

from ..samples import DATA_WAIT, GpuSample, ProcSample, StackShares
from . import stats
from .phases import WARMUP_STEPS, KnobState, Phase, PhaseRow, PhaseTable, knob_state
from .series import ChartBinner, ChartSeries
from .steps import Step

# 100k steps is hours of a fast loop at ~100 bytes each; GPU samples at 2 Hz: 5 h.
MAX_STEPS = 100_000
MAX_GPU_TICKS = 36_000
MAX_NOTICES = 200
MAX_PROC_TICKS = 7200  # two hours of 1 Hz process samples
MAX_FACTS = 10_000  # of each kind: one per epoch, scan or knob change; years of those
# The default window for the live figures: long enough to hold several slow steps.
DEFAULT_WINDOW_S = 10.0
# The advisor judges a window only with this many measured (post-warm-up) steps covering this
# many seconds: short runs on the H100 drew "GPU under-used" and "launch-bound" headlines from
# the seconds before their first steps, and a single epoch's worker start-up read as a
# per-epoch restart (issue: diagnosis). Two seconds hold 20 NVML and 2 process samples.
MIN_ADVICE_STEPS = 5
MIN_ADVICE_S = 2.0


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
    # Per GPU (as in latest_gpus): NVML utilization averaged over the last second. One
    # reading swings between 0 and 100% on a GPU that waits for data in bursts.
    recent_util_pct: tuple[float | None, ...]
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
    # What is happening while there are no figures to show ("waiting for the first
    # optimizer.step() (12 s)..."): the screen explains itself as it happens.
    activity_note: str | None = None
    run_steps: stats.StepStats | None = None  # the whole run's figures, once the job ended
    # Each hooked process's own figures over the window, by rank (torchrun), then PID.
    ranks: tuple[stats.RankStats, ...] = ()
    # The hook's latest memory audit, and its step_parts fact: the module whose forwards
    # are counted and timed, or why none is (docs/steps.md).
    memory: stats.MemoryAudit | None = None
    step_parts_fact: dict[str, Any] | None = None

    @property
    def elapsed_s(self) -> float:
        return self.t - self.started_at


@dataclass
class Session:
    command: tuple[str, ...] = ()
    clock: Callable[[], float] = time.time
    started_at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.started_at = self.started_at or self.clock()
        self._steps: deque[Step] = deque(maxlen=MAX_STEPS)
        self._gpu: deque[tuple[GpuSample, ...]] = deque(maxlen=MAX_GPU_TICKS)
        self._processes: tuple[ProcSample, ...] = ()
        self._hooked: dict[int, HookedProcess] = {}
        self._notices: deque[str] = deque(maxlen=MAX_NOTICES)
        self._notice_count = 0
        self._readings: dict[str, dict[str, Any]] = {}
        self._job = JobState()
        self._gpu_names: tuple[str | None, ...] = ()
        self._nvml_error: str | None = None
        self._total_samples: int | None = None
        self._dropped_frames = 0
        self._last_step: dict[int, int] = {}
        self._samples_by_pid: dict[int, int] = {}  # every process's samples so far
        self._gpus_by_pid: dict[int, set[int]] = {}  # the GPUs NVML saw each PID on, so far
        self._step_pids: set[int] = set()  # every process that has sent a step
        self._knobs: dict[str, KnobState] = {}
        self._knob_seq: dict[int, int] = {}
        # loader / syncs / flops frames as they came, to find the one in force at any time
        self._facts: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self._proc_ticks: deque[stats.ProcTick] = deque(maxlen=MAX_PROC_TICKS)
        self.cpu_count: int | None = None
        self.driver: str | None = None
        # Called as listener(kind, payload) for every write: the recorder's way in.
        self.listener: Callable[[str, dict[str, Any]], None] | None = None
        self._phases: list[Phase] = [Phase(1, "start", 1, self.started_at)]
        self._binners: dict[tuple[float, int], ChartBinner] = {}  # per chart window
        self._phase_table = PhaseTable()
        self._stacks: tuple[float, StackShares] | None = None
        self._job_ended_at: float | None = None
        self._autopilot: dict[str, Any] | None = None
        self._stacks_expected: float | None = None  # seconds after start of py-spy's 1st window
        self._run_cache: tuple[int, stats.StepStats] | None = None

    def _tell(self, kind: str, **payload: Any) -> None:
        if self.listener is not None:
            self.listener(kind, payload)

    # -- writers (any thread) -----------------------------------------------------------

    def set_gpus(
        self, names: list[str | None], error: str | None = None, driver: str | None = None
    ) -> None:
        self._tell("gpus", names=names, error=error, driver=driver)
        self.driver = driver
        with self._lock:
            self._gpu_names = tuple(names)
            self._nvml_error = error

    def process_hello(self, pid: int, hello: dict[str, Any]) -> None:
        self._tell("hello", pid=pid, frame=hello)
        argv = hello.get("argv")
        process = HookedProcess(
            pid=pid,
            argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
            rank=_int_or_none(hello.get("rank")),
            torch_version=hello.get("torch") if isinstance(hello.get("torch"), str) else None,
            host=hello.get("host") if isinstance(hello.get("host"), str) else None,
            connected=True,
            local_rank=_int_or_none(hello.get("local_rank")),
        )
        with self._lock:
            self._hooked[pid] = process

    def process_disconnected(self, pid: int) -> None:
        self._tell("disconnected", pid=pid)
        with self._lock:
            if pid in self._hooked:
                self._hooked[pid] = _replace(self._hooked[pid], connected=False)

    def set_knobs(self, pid: int, specs: Any) -> None:
        """The knobs a process advertised (hello or knobs frame); the primary's are shown."""
        if not isinstance(specs, list):
            return
        self._tell("knobs", pid=pid, knobs=specs)
        with self._lock:
            if pid != self._primary_pid_locked():
                return
            for spec in specs:
                state = knob_state(spec)
                if state is not None:
                    old = self._knobs.get(state.name)
                    pending = old.pending if old else None
                    self._knobs[state.name] = KnobState(**{**state.__dict__, "pending": pending})

    def knob_requested(self, name: str, value: Any) -> None:
        self._tell("knob_requested", name=name, value=value)
        with self._lock:
            if name in self._knobs:
                self._knobs[name] = _replace(self._knobs[name], pending=value, error=None)

    def knob_outcome(self, pid: int, frame: dict[str, Any]) -> None:
        """A knob_applied frame: the value in force; a real change opens a phase."""
        name, seq = frame.get("name"), frame.get("seq")
        self._tell("knob_outcome", pid=pid, frame=frame)
        with self._lock:
            if pid != self._primary_pid_locked() or name not in self._knobs:
                return
            if isinstance(seq, int):  # the hello's history and a live frame can overlap
                if seq <= self._knob_seq.get(pid, 0):
                    return
                self._knob_seq[pid] = seq
            ok, value, step = frame.get("ok"), frame.get("value"), frame.get("step")
            if not isinstance(value, (bool, int, str)):
                return  # not an outcome a hook sends: no value in force to show
            error = None if ok else str(frame.get("error") or "refused")
            self._knobs[name] = _replace(self._knobs[name], value=value, pending=None, error=error)
            if not isinstance(step, int):
                return
            sent = frame.get("t")
            t = float(sent) if isinstance(sent, (int, float)) else self.clock()
            before = list(self._phases)
            if frame.get("reverted"):
                current = self._phases[-1]
                revert = f"revert {name}={value}"
                if current.first_step == step + 1 and current.change.startswith("revert"):
                    self._phases[-1] = _replace(current, change=f"{current.change}, {revert}")
                else:
                    self._phases[-1] = _replace(current, failed=error)
                    self._phases.append(Phase(len(self._phases) + 1, revert, step + 1, t))
            elif ok and value != frame.get("previous"):
                current = self._phases[-1]
                change = f"{name}={value}"
                if current.first_step == step + 1:  # several changes at one boundary
                    self._phases[-1] = _replace(current, change=f"{current.change}, {change}")
                else:
                    self._phases.append(Phase(len(self._phases) + 1, change, step + 1, t))
            for index, phase in enumerate(self._phases):  # only the phases that changed
                if index >= len(before) or phase != before[index]:
                    self._tell("phase", phase=asdict(phase))

    def add_step_rows(self, pid: int, rows: list[Any]) -> int:
        """Append steps from a wire frame; returns how many rows were malformed."""
        self._tell("steps", pid=pid, rows=rows)
        parsed = [Step.from_row(pid, row) if isinstance(row, list) else None for row in rows]
        good = [s for s in parsed if s is not None]
        with self._lock:
            for step in good:
                if step.step <= self._last_step.get(pid, 0):
                    continue  # a re-attach resends the ring's backlog
                self._last_step[pid] = step.step
                self._steps.append(step)
                self._step_pids.add(pid)
                if step.samples is not None:
                    self._total_samples = (self._total_samples or 0) + step.samples
                    self._samples_by_pid[pid] = self._samples_by_pid.get(pid, 0) + step.samples
            self._dropped_frames += len(parsed) - len(good)
        return len(parsed) - len(good)

    def add_gpu_samples(self, samples: tuple[GpuSample, ...]) -> None:
        self._tell("gpu", samples=[_gpu_record(s) for s in samples])
        with self._lock:
            self._gpu.append(samples)
            for gpu in samples:
                for proc in gpu.processes:
                    self._gpus_by_pid.setdefault(proc.pid, set()).add(gpu.index)

    def set_processes(
        self, processes: tuple[ProcSample, ...], system_cpu_pct: float | None = None
    ) -> None:
        """One process sample, and the busy share of all the machine's cores meanwhile. When the
        job's tree is gone, the last sample stays on screen, marked ended."""
        self._tell(  # flat: no asdict() copy
            "procs", samples=[vars(p) for p in processes], system_cpu_pct=system_cpu_pct
        )
        workers = tuple(
            p.cpu_pct for p in processes if p.role == "worker" and p.cpu_pct is not None
        )
        mains = [p.cpu_pct for p in processes if p.role == "main" and p.cpu_pct is not None]
        tick = stats.ProcTick(self.clock(), workers, sum(mains) if mains else None, system_cpu_pct)
        with self._lock:
            if not processes and self._processes:
                processes = tuple(
                    _replace(p, status="ended", cpu_pct=None, io_read_bps=None, io_write_bps=None)
                    for p in self._processes
                )
            self._processes = processes
            self._proc_ticks.append(tick)

    def set_stack_shares(self, stacks: StackShares) -> None:
        """A window of py-spy samples of the training thread (a job without the hook)."""
        self._tell("stacks", **vars(stacks))
        with self._lock:
            self._stacks = (self.clock(), stacks)

    def add_fact(self, pid: int, frame: dict[str, Any]) -> None:
        """The primary process's latest loader / syncs / flops / model frame; the fields the
        advisor reads are checked here, so a corrupt frame cannot break a later snapshot."""
        self._tell("fact", pid=pid, frame=frame)
        kind = frame.get("type")
        checked = stats.checked_fact(kind, frame) if isinstance(kind, str) else None
        if checked is None:
            return
        with self._lock:
            if pid == self._primary_pid_locked():
                facts = self._facts.setdefault(kind, [])  # type: ignore[arg-type]
                facts.append((self.clock(), checked))
                del facts[:-MAX_FACTS]

    def set_autopilot(self, status: Any) -> None:
        """The autopilot's state (autopilot/pilot.py PilotStatus, or its recorded dict); the
        record gets it whenever its state or a trial changes."""
        record = status if isinstance(status, dict) else asdict(status)
        with self._lock:
            previous = self._autopilot
            self._autopilot = record
        changed = previous is None or any(
            previous.get(key) != record.get(key) for key in ("state", "trials", "done")
        )
        if changed:
            self._tell("autopilot", status=record)

    def note_findings(self, findings: list[dict[str, Any]]) -> None:
        """For the record: the advisor's findings, as shown live (replay recomputes them)."""
        self._tell("findings", findings=findings)

    def add_notice(self, text: str) -> None:
        self._tell("notice", text=text)
        with self._lock:
            self._notices.append(text)
            self._notice_count += 1

    def add_reading(self, source: str, value: dict[str, Any]) -> None:
        """The latest sample of a sampler whose data has no place of its own (collect/base.py):
        kept, recorded and replayed, shown by whichever panel reads it."""
        self._tell("reading", source=source, value=value)
        with self._lock:
            self._readings[source] = value

    def count_dropped(self, frames: int) -> None:
        """Frames from a hook that could not be read (recorded: a replay shows them too)."""
        self._tell("dropped", frames=frames)
        with self._lock:
            self._dropped_frames += frames

    def note_stop(self, reason: str) -> None:
        """The user asked the job to stop (its exit code is then no failure)."""
        self._tell("stop", reason=reason)
        with self._lock:
            self._job = _replace(self._job, stopped_by=reason)

    def job_ended(self, exit_code: int | None, stderr_tail: tuple[str, ...] = ()) -> None:
        """``exit_code`` is None when it cannot be known (a process we attached to)."""
        self._tell("job_ended", exit_code=exit_code, stderr_tail=list(stderr_tail))
        with self._lock:
            self._job = JobState(
                running=False,
                exit_code=exit_code,
                stderr_tail=stderr_tail,
                stopped_by=self._job.stopped_by,
            )
            self._job_ended_at = self.clock()

    # -- readers ------------------------------------------------------------------------

    def hooked_pids(self) -> set[int]:
        with self._lock:
            return set(self._hooked)

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

    def _primary_pid_locked(self) -> int | None:
        if not self._hooked:
            return None
        return min(self._hooked.values(), key=lambda p: (p.rank is None, p.rank or 0, p.pid)).pid

    def gpu_ticks(self) -> list[tuple[GpuSample, ...]]:
        with self._lock:
            return list(self._gpu)

    def steps(self) -> list[Step]:
        with self._lock:
            return list(self._steps)

    def facts(self, kind: str) -> list[dict[str, Any]]:
        """The primary process's ``kind`` frames (loader, syncs, flops, model), oldest first."""
        with self._lock:
            return [frame for _, frame in self._facts.get(kind, ())]

    def knob(self, name: str) -> KnobState | None:
        with self._lock:
            return self._knobs.get(name)

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
            since = end - window_s
            charts = None
            if chart_points:
                key = (chart_window_s, chart_points)
                binner = self._binners.setdefault(key, ChartBinner(*key))
                charts = binner.series(self._steps, self._gpu, now, self._primary_pid_locked())
            recent_steps = _tail_between(self._steps, since, end)
            recent_gpu = _ticks_between(self._gpu, since, end)
            primary = self._primary_pid_locked()
            figures = stats.step_stats(recent_steps, primary)
            processes = self._processes
            observation, advice_wait = self._advice_window(
                recent_steps, recent_gpu, since, end, figures
            )
            snapshot = Snapshot(
                t=now,
                started_at=self.started_at,
                command=self.command,
                job=self._job,
                gpu_names=self._gpu_names,
                nvml_error=self._nvml_error,
                hooked=tuple(self._hooked.values()),
                # The job's steps: the primary process's own counter (every rank of a DDP
                # job takes the same steps), which also counts steps before a late connect.
                total_steps=self._last_step.get(primary, 0) if primary is not None else 0,
                total_samples=self._total_samples,
                window_s=window_s,
                steps=self._window_steps(figures, observation),
                gpu=stats.gpu_stats(recent_gpu),
                procs=stats.proc_stats(processes),
                latest_gpus=self._gpu[-1] if self._gpu else (),
                recent_util_pct=_mean_util_per_gpu(_ticks_between(self._gpu, end - 1.0, end)),
                processes=processes,
                notices=tuple(self._notices),
                dropped_frames=self._dropped_frames,
                charts=charts,
                knobs=tuple(self._knobs.values()),
                phases=tuple(
                    self._phase_table.rows(
                        self._phases, self._steps, self._gpu, primary, self._observe_measured
                    )
                )
                if with_phases
                else (),
                observation=observation,
                phase=len(self._phases),
                stacks=self._stacks[1] if self._stacks else None,
                advice_wait=advice_wait,
                autopilot=self._autopilot,
                notice_count=self._notice_count,
                readings=dict(self._readings),
                activity_note=self._activity_note(now, primary),
                run_steps=self._run_steps(primary),
                ranks=self._rank_stats(recent_steps, self._known_figures(primary, figures)),
                memory=stats.MemoryAudit.from_frame(self._fact_at("memory_audit", end)),
                step_parts_fact=self._fact_at("step_parts", end),
            )
        return snapshot

    def _window_end(self, now: float) -> float:
        """Where live windows end: now while the job runs; after it, at its last step."""
        if self._job.running:
            return now
        if self._steps:
            return min(now, self._steps[-1].t)
        return min(now, self._job_ended_at or now)

    def _activity_note(self, now: float, primary: int | None) -> str | None:
        """In words, what the job is doing when there is nothing to show yet (lock held)."""
        elapsed = now - self.started_at
        stepped = primary is not None and self._last_step.get(primary, 0) > 0
        if stepped:
            return None
        if not self._job.running:
            code = self._job.exit_code
            ended = "ended" if code in (0, None) else f"failed (exit {code})"
            return f"the job {ended} before any training step"
        if self._stacks is None and not self._hooked and self._stacks_expected:
            due = max(0.0, self._stacks_expected - elapsed)
            return (
                f"sampling the training thread with py-spy: the first window comes in "
                f"{due:.0f} s (no hook: no step times)"
            )
        if self._stacks is not None and not self._hooked:
            return None  # py-spy's window is on screen
        if self._hooked:
            pids = ", ".join(str(pid) for pid in sorted(self._hooked))
            return (
                f"PID {pids} is hooked (it iterated a DataLoader) but has made no "
                f"optimizer.step() in {elapsed:.0f} s: the hook counts a step at each one"
            )
        return (
            f"waiting for the first training step ({elapsed:.0f} s): the hook starts at the "
            "first DataLoader batch or optimizer.step() of a process that imports torch"
        )

    def _known_figures(
        self, primary: int | None, figures: stats.StepStats
    ) -> dict[int, stats.StepStats]:
        """With one process, its row is the window's figures: the same steps, computed once
        (lock held)."""
        return {primary: figures} if primary is not None and self._step_pids == {primary} else {}

    def _rank_stats(
        self, steps: Sequence[Step], known: dict[int, stats.StepStats] | None = None
    ) -> tuple[stats.RankStats, ...]:
        """Per hooked process, its figures over ``steps`` (or ``known``'s, by PID) and its
        totals (lock held)."""
        return stats.rank_stats(
            steps,
            [
                stats.RankIdentity(p.pid, p.rank, p.local_rank, p.host)
                for p in self._hooked.values()
            ],
            self._last_step,
            self._samples_by_pid,
            self._gpus_by_pid,
            known,
        )

    def _run_steps(self, primary: int | None) -> stats.StepStats | None:
        """The whole run's step figures once the job has ended (cached: no step comes later
        but the drain's, which a new count of steps picks up)."""
        if self._job.running:
            return None
        if self._run_cache is None or self._run_cache[0] != len(self._steps):
            self._run_cache = (len(self._steps), stats.step_stats(list(self._steps), primary))
        return self._run_cache[1]

    def expect_stacks(self, window_s: float) -> None:
        """A job without the hook: py-spy's first window is due in ``window_s``."""
        with self._lock:
            self._stacks_expected = self.clock() - self.started_at + window_s

    @staticmethod
    def _window_steps(
        figures: stats.StepStats, observation: stats.Observation | None
    ) -> stats.StepStats:
        """The step figures shown: the window's; a job without the hook, py-spy's data-wait."""
        if observation is not None and observation.data_wait_source == "py-spy":
            return observation.steps
        return figures

    def _advice_window(
        self,
        recent: list[Step],
        recent_gpu: list[tuple[GpuSample, ...]],
        since: float,
        end: float,
        figures: stats.StepStats,
    ) -> tuple[stats.Observation | None, str | None]:
        """The observation the advisor judges over a live window, or why there is none;
        ``figures`` are the window's own step figures (``recent``'s)."""
        primary = self._primary_pid_locked()
        if primary is None or not recent:
            if self._stacks and not self._hooked:
                seen, stacks = self._stacks  # current until the next window is due
                if since - stacks.window_s <= seen <= end:
                    return self._observe([], recent_gpu, since, end), None
            if primary is None:
                return None, "no training step seen yet"
            return None, f"no training step in the last {end - since:g} s"
        phase = self._phases[-1]
        # The phase's first steps pay for its start (workers forking, cuDNN autotuning, a
        # compile): the advisor skips them, as the phase table does (phases.WARMUP_STEPS).
        first = phase.first_step + WARMUP_STEPS
        if self._last_step.get(primary, 0) < first:
            return None, f"phase {phase.index} ({phase.change}) is warming up"
        own = [s for s in recent if s.pid == primary and s.step >= first]
        others = [s for s in recent if s.pid != primary]
        # One process past its phase's warm-up: the same steps as the window's figures, which
        # were a third of a view's cost when computed again (py-spy, H200, 2026-11-24).
        same = figures if not others and len(own) == len(recent) else None
        return self._observe_measured(own, others, same)

    def _observe_measured(
        self,
        measured: Sequence[Step],
        other_ranks: Sequence[Step] = (),
        known: stats.StepStats | None = None,
    ) -> tuple[stats.Observation | None, str | None]:
        """An observation of measured steps (one phase, warm-up excluded) over the time they
        ran; None, with the reason, when they are too few to judge. ``known``: their step
        figures, where already computed."""
        timed = [s for s in measured if s.step_ms is not None]
        if len(timed) < MIN_ADVICE_STEPS:
            return None, f"needs {MIN_ADVICE_STEPS} measured steps (has {len(timed)})"
        start = timed[0].t - timed[0].step_ms / 1000.0  # type: ignore[operator]
        stop = timed[-1].t
        if stop - start < MIN_ADVICE_S:
            return None, f"needs {MIN_ADVICE_S:g} s of measured steps (has {stop - start:.1f} s)"
        ranks = [s for s in other_ranks if start < s.t <= stop]
        ticks = _ticks_between(self._gpu, start, stop)
        return self._observe(timed + ranks, ticks, start, stop, known), None

    def _fact_at(self, kind: str, t: float) -> dict[str, Any] | None:
        """The latest fact of a kind known at time ``t`` (lock held)."""
        found = None
        for seen, frame in self._facts.get(kind, ()):
            if seen > t:
                break
            found = frame
        return found

    def _observe(
        self,
        steps: list[Step],
        gpu_ticks: list[tuple[GpuSample, ...]],
        start: float,
        end: float,
        known: stats.StepStats | None = None,
    ) -> stats.Observation:
        """What the advisor needs over [start, end] (called with the lock held); ``known``:
        the step figures of ``steps``, where already computed."""
        primary = self._primary_pid_locked()
        procs = _ticks_covering(self._proc_ticks, start, end)
        workers, worker_cpu, main_cpu, system_cpu = stats.mean_worker_cpu(procs)
        loader = self._fact_at("loader", end) or {}
        epochs = sum(1 for seen, _ in self._facts.get("loader", ()) if start <= seen <= end)
        syncs = self._fact_at("syncs", end)
        flops = self._fact_at("flops", end) or {}
        per_sample = None
        if isinstance(flops.get("flops"), int) and flops.get("samples"):
            per_sample = flops["flops"] / flops["samples"]
        shape = loader.get("shape")
        step_stats, wait_source = known or stats.step_stats(steps, primary), "hook"
        if not steps and self._stacks:
            step_stats = _replace(step_stats, data_wait_pct=self._stacks[1].shares[DATA_WAIT])
            wait_source = "py-spy"
        return stats.Observation(
            ranks=self._rank_stats(steps) if len(self._hooked) > 1 else (),
            steps=step_stats,
            gpu=stats.gpu_stats(gpu_ticks),
            gpu_name=next((n for n in self._gpu_names if n), None),
            pcie_rx_mibps=stats.mean_pcie_rx(gpu_ticks),
            workers=workers,
            worker_cpu_pct=worker_cpu,
            main_cpu_pct=main_cpu,
            cpu_count=self.cpu_count,
            batch_dtype=loader.get("dtype"),
            batch_shape=tuple(shape) if isinstance(shape, list) else None,
            batch_bytes=loader.get("bytes"),
            pin_memory=loader.get("pin_memory"),
            persistent_workers=loader.get("persistent_workers"),
            syncs_per_step=syncs.get("count") if syncs else None,
            sync_sites=tuple(syncs.get("sites") or ()) if syncs else (),
            flops_per_sample=per_sample,
            model=stats.ModelFacts.from_frame(self._fact_at("model", end)),
            data_wait_source=wait_source,
            system_cpu_pct=system_cpu,
            epochs=epochs,
            window_s=end - start,
            memory=stats.MemoryAudit.from_frame(self._fact_at("memory_audit", end)),
            step_parts_reason=(self._fact_at("step_parts", end) or {}).get("reason"),
            timed_model=(self._fact_at("step_parts", end) or {}).get("model"),
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mean_util_per_gpu(ticks: list[tuple[GpuSample, ...]]) -> tuple[float | None, ...]:
    if not ticks:
        return ()
    per_gpu = zip(*(tick for tick in ticks if len(tick) == len(ticks[-1])), strict=True)
    means = []
    for samples in per_gpu:
        known = [g.util_pct for g in samples if g.util_pct is not None]
        means.append(sum(known) / len(known) if known else None)
    return tuple(means)


def _gpu_record(sample: GpuSample) -> dict[str, Any]:
    """What asdict() returns, without its deep copy: 20 times cheaper, and it runs at every
    GPU sample."""
    return {**vars(sample), "processes": [vars(p) for p in sample.processes]}


def _ticks_covering(ticks: deque[stats.ProcTick], start: float, end: float) -> list[Any]:
    """Process samples whose period (since the sample before) overlaps [start, end]: psutil's
    CPU % of a sample is its average since the previous one."""
    out: list[stats.ProcTick] = []
    previous_t = float("-inf")
    for tick in ticks:
        if tick.t > start and previous_t < end:
            out.append(tick)
        if tick.t >= end:
            break
        previous_t = tick.t
    return out


def _tail_between(steps: deque[Step], since: float, end: float) -> list[Step]:
    """The steps in (since, end], walking back from the newest (windows are short)."""
    out = []
    for step in reversed(steps):
        if step.t > end:
            continue
        if step.t <= since:
            break
        out.append(step)
    out.reverse()
    return out


def _ticks_between(
    ticks: deque[tuple[GpuSample, ...]], since: float, end: float
) -> list[tuple[GpuSample, ...]]:
    """The GPU ticks in (since, end], walking back from the newest."""
    out = []
    for tick in reversed(ticks):
        if not tick:
            continue
        if tick[0].t > end:
            continue
        if tick[0].t <= since:
            break
        out.append(tick)
    out.reverse()
    return out
