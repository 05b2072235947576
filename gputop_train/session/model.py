"""The session: every series of one run in bounded buffers, and immutable snapshots of it.

Samplers and the hook client write from their own threads; front ends (headless printer,
TUI, recorder) call ``snapshot()`` and get one frozen view with the derived figures
computed once, so no front end computes statistics of its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from dataclasses import replace as _replace
from typing import Any

from ..collect.nvml import GpuSample
from ..collect.procs import ProcSample
from ..collect.stacks import DATA_WAIT, StackShares
from . import stats
from .phases import KnobState, Phase, PhaseRow, PhaseTable, knob_state
from .series import ChartBinner, ChartSeries
from .steps import Step

# 100k steps is hours of a fast loop at ~100 bytes each; GPU samples at 10 Hz: 1 h.
MAX_STEPS = 100_000
MAX_GPU_TICKS = 36_000
MAX_NOTICES = 200
MAX_PROC_TICKS = 7200  # two hours of 1 Hz process samples
# The default window for the live figures: long enough to hold several slow steps.
DEFAULT_WINDOW_S = 10.0


@dataclass(frozen=True)
class HookedProcess:
    """A training process that the monitor is connected to (from its hello frame)."""

    pid: int
    argv: tuple[str, ...]
    rank: int | None
    torch_version: str | None
    host: str | None
    connected: bool


@dataclass(frozen=True)
class JobState:
    running: bool = True
    exit_code: int | None = None
    stderr_tail: tuple[str, ...] = ()


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
    # Per GPU (as in latest_gpus): NVML utilization averaged over the last second. One 10 Hz
    # reading swings between 0 and 100% on a GPU that waits for data in bursts.
    recent_util_pct: tuple[float | None, ...]
    processes: tuple[ProcSample, ...]
    notices: tuple[str, ...]
    dropped_frames: int
    charts: ChartSeries | None = None
    knobs: tuple[KnobState, ...] = ()
    phases: tuple[PhaseRow, ...] = ()
    observation: stats.Observation | None = None
    phase: int = 1  # the number of the phase now running
    stacks: StackShares | None = None  # the latest py-spy window, for a job without the hook

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
        self._job = JobState()
        self._gpu_names: tuple[str | None, ...] = ()
        self._nvml_error: str | None = None
        self._total_samples: int | None = None
        self._dropped_frames = 0
        self._last_step: dict[int, int] = {}
        self._knobs: dict[str, KnobState] = {}
        self._knob_seq: dict[int, int] = {}
        # loader / syncs / flops frames as they came, to find the one in force at any time
        self._facts: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self._proc_ticks: deque[tuple[float, tuple[float, ...], float | None]] = deque(
            maxlen=MAX_PROC_TICKS
        )
        self.cpu_count: int | None = None
        self.driver: str | None = None
        # Called as listener(kind, payload) for every write: the recorder's way in.
        self.listener: Callable[[str, dict[str, Any]], None] | None = None
        self._phases: list[Phase] = [Phase(1, "start", 1, self.started_at)]
        self._binners: dict[tuple[float, int], ChartBinner] = {}  # per chart window
        self._phase_table = PhaseTable()
        self._stacks: tuple[float, StackShares] | None = None

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
            rank=hello.get("rank") if isinstance(hello.get("rank"), int) else None,
            torch_version=hello.get("torch") if isinstance(hello.get("torch"), str) else None,
            host=hello.get("host") if isinstance(hello.get("host"), str) else None,
            connected=True,
        )
        with self._lock:
            self._hooked[pid] = process

    def process_disconnected(self, pid: int) -> None:
        self._tell("disconnected", pid=pid)
        with self._lock:
            if pid in self._hooked:
                old = self._hooked[pid]
                self._hooked[pid] = HookedProcess(
                    old.pid, old.argv, old.rank, old.torch_version, old.host, connected=False
                )

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
            error = None if ok else str(frame.get("error") or "refused")
            self._knobs[name] = _replace(self._knobs[name], value=value, pending=None, error=error)
            if not isinstance(step, int):
                return
            t = frame.get("t") if isinstance(frame.get("t"), (int, float)) else self.clock()
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
            self._tell("phase", phases=[asdict(p) for p in self._phases])

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
                if step.samples is not None:
                    self._total_samples = (self._total_samples or 0) + step.samples
            self._dropped_frames += len(parsed) - len(good)
        return len(parsed) - len(good)

    def add_gpu_samples(self, samples: tuple[GpuSample, ...]) -> None:
        self._tell("gpu", samples=[_gpu_record(s) for s in samples])
        with self._lock:
            self._gpu.append(samples)

    def set_processes(self, processes: tuple[ProcSample, ...]) -> None:
        self._tell("procs", samples=[vars(p) for p in processes])  # flat: no asdict() copy
        workers = tuple(
            p.cpu_pct for p in processes if p.role == "worker" and p.cpu_pct is not None
        )
        mains = [p.cpu_pct for p in processes if p.role == "main" and p.cpu_pct is not None]
        with self._lock:
            self._processes = processes
            self._proc_ticks.append((self.clock(), workers, sum(mains) if mains else None))

    def set_stack_shares(self, stacks: StackShares) -> None:
        """A window of py-spy samples of the training thread (a job without the hook)."""
        self._tell("stacks", **vars(stacks))
        with self._lock:
            self._stacks = (self.clock(), stacks)

    def add_fact(self, pid: int, frame: dict[str, Any]) -> None:
        """The primary process's latest loader / syncs / flops frame."""
        self._tell("fact", pid=pid, frame=frame)
        with self._lock:
            if pid == self._primary_pid_locked():
                self._facts.setdefault(frame["type"], []).append((self.clock(), frame))

    def note_findings(self, findings: list[dict[str, Any]]) -> None:
        """For the record: the advisor's findings, as shown live (replay recomputes them)."""
        self._tell("findings", findings=findings)

    def add_notice(self, text: str) -> None:
        self._tell("notice", text=text)
        with self._lock:
            self._notices.append(text)

    def count_dropped(self, frames: int) -> None:
        with self._lock:
            self._dropped_frames += frames

    def job_ended(self, exit_code: int | None, stderr_tail: tuple[str, ...] = ()) -> None:
        """``exit_code`` is None when it cannot be known (a process we attached to)."""
        self._tell("job_ended", exit_code=exit_code, stderr_tail=list(stderr_tail))
        with self._lock:
            self._job = JobState(running=False, exit_code=exit_code, stderr_tail=stderr_tail)

    # -- readers ------------------------------------------------------------------------

    def hooked_pids(self) -> set[int]:
        with self._lock:
            return set(self._hooked)

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
        """Figures over the last ``window_s``; with ``chart_points``, binned chart series too;
        with ``with_phases`` the phase table (a pass over every step: ask only to show it)."""
        now = self.clock()
        since = now - window_s
        with self._lock:
            charts = None
            if chart_points:
                key = (chart_window_s, chart_points)
                binner = self._binners.setdefault(key, ChartBinner(*key))
                charts = binner.series(self._steps, self._gpu, now, self._primary_pid_locked())
            recent_steps = _tail_since(self._steps, since)
            recent_gpu = _tail_since_ticks(self._gpu, since)
            primary = self._primary_pid_locked()
            processes = self._processes
            observation = self._observe(recent_steps, recent_gpu, since, now)
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
                steps=observation.steps,
                gpu=observation.gpu,
                procs=stats.proc_stats(processes),
                latest_gpus=self._gpu[-1] if self._gpu else (),
                recent_util_pct=_mean_util_per_gpu(_tail_since_ticks(self._gpu, now - 1.0)),
                processes=processes,
                notices=tuple(self._notices),
                dropped_frames=self._dropped_frames,
                charts=charts,
                knobs=tuple(self._knobs.values()),
                phases=tuple(
                    self._phase_table.rows(
                        self._phases, self._steps, self._gpu, primary, now, self._observe
                    )
                )
                if with_phases
                else (),
                observation=observation,
                phase=len(self._phases),
                stacks=self._stacks[1] if self._stacks else None,
            )
        return snapshot

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
    ) -> stats.Observation:
        """What the advisor needs over [start, end] (called with the lock held)."""
        primary = self._primary_pid_locked()
        procs = [tick for tick in self._proc_ticks if start <= tick[0] <= end]
        workers, worker_cpu, main_cpu = stats.mean_worker_cpu(procs)
        loader = self._fact_at("loader", end) or {}
        syncs = self._fact_at("syncs", end)
        flops = self._fact_at("flops", end) or {}
        precision = self._knobs["precision"].value if "precision" in self._knobs else None
        per_sample = None
        if isinstance(flops.get("flops"), int) and flops.get("samples"):
            per_sample = flops["flops"] / flops["samples"]
        shape = loader.get("shape")
        step_stats, wait_source = stats.step_stats(steps, primary), "hook"
        if not step_stats.steps and self._stacks:
            seen, stacks = self._stacks  # current until the next window is due
            if start - stacks.window_s <= seen <= end:
                step_stats = _replace(step_stats, data_wait_pct=stacks.shares[DATA_WAIT])
                wait_source = "py-spy"
        return stats.Observation(
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
            precision=precision,
            data_wait_source=wait_source,
        )


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
    """What asdict() returns, without its deep copy: 20 times cheaper, and it runs at 10 Hz."""
    return {**vars(sample), "processes": [vars(p) for p in sample.processes]}


def _tail_since(steps: deque[Step], since: float) -> list[Step]:
    """The steps after ``since``, walking back from the newest (windows are short)."""
    out = []
    for step in reversed(steps):
        if step.t <= since:
            break
        out.append(step)
    out.reverse()
    return out


def _tail_since_ticks(ticks: deque[tuple[GpuSample, ...]], since: float) -> list[Any]:
    out = []
    for tick in reversed(ticks):
        if tick and tick[0].t <= since:
            break
        out.append(tick)
    out.reverse()
    return out
