"""Runs the samplers and the hook client off the UI thread, feeding one session.

Samplers have one shape (collect/base.py) and are registered in one list,
``default_samplers``: the Monitor opens each, runs it on its own thread at its period, and
closes it. A costly sampler stretches its period while every core of the machine is busy:
the monitor yields to the job.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import events, wire
from ..autopilot.pilot import DEFAULT_BUDGET_S, Pilot, knobs_known, schedule_problems
from ..collect.base import COSTLY, Sampler, SamplerUnavailable
from ..collect.nvml import GpuSampling
from ..collect.procs import ProcessSampler, ProcessSampling
from ..collect.stacks import StackSampler, StackSampling
from ..record import reader
from ..session.model import DEFAULT_WINDOW_S, Session
from ..session.phases import describe_knobs
from ..views import finding_dict, view_of
from .hook_client import HookClient
from .stall import StallWatch, where_line

# After the job exits, how long to wait for its hook's last frames (a goodbye ends it sooner).
JOB_END_DRAIN_S = 3.0
# How often a --schedule waits for the job's knobs to be known (the first step's built-ins).
SCHEDULE_CHECK_PERIOD_S = 0.5

FINDINGS_PERIOD_S = 5.0
PILOT_PERIOD_S = 1.0
STALL_PERIOD_S = 1.0  # how often the stall watch looks at the ranks' last steps
# How long a stop waits for the stall dump of a job that does not stop: the hooks' answers
# (3 s) and a py-spy dump per rank (0.2-1 s each on the dev box, 2026-11-27).
STOP_DUMP_S = 15.0
# Several ranks take a change after one common step this far ahead of the furthest step any
# reported: the hooks send rows every 0.5 s (listener.SEND_PERIOD_S), so a rank may be up to
# that far past what the monitor knows; four times that covers a late send and the frame's
# way back. At least a few steps, for slow steps.
RANKS_AHEAD_S = 2.0
RANKS_AHEAD_MIN_STEPS = 3
# The machine counts as saturated at this busy share of all its cores (psutil); a costly
# sampler then runs this many times less often.
SATURATED_CPU_PCT = 95.0
SATURATED_STRETCH = 3.0
# A sampler that keeps failing says so this many times, then only counts.
MAX_ERROR_NOTICES = 3


def default_samplers(
    session: Session,
    root_pid: int,
    nvml: Any = None,
    psutil_module: Any = None,
    stacks: StackSampler | None = None,
) -> list[Sampler]:
    """The samplers of a job: one line each."""
    samplers: list[Sampler] = [
        GpuSampling(nvml),
        ProcessSampling(ProcessSampler(root_pid, session.hooked_pids, psutil_module)),
    ]
    if stacks is not None:  # a job without the hook (attach): py-spy windows
        samplers.append(StackSampling(stacks))
    return samplers


class Monitor:
    """Owns the sampler threads for one job; ``stop()`` joins them."""

    def __init__(
        self,
        session: Session,
        root_pid: int,
        nvml: Any = None,
        psutil_module: Any = None,
        stacks: StackSampler | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        samplers: Sequence[Sampler] | None = None,
        recording: Path | None = None,
    ) -> None:
        self.session = session
        # The launched job's hooks append their step rows here too (hook/row_log.py).
        self.recording = recording
        self.root_pid = root_pid
        self.window_s = window_s  # the live window the user chose: the record's findings too
        if samplers is None:
            samplers = default_samplers(session, root_pid, nvml, psutil_module, stacks)
        self.samplers = list(samplers)
        self._stop = threading.Event()
        self.client = HookClient(session, lambda: session.process_pids() | {root_pid})
        self._threads: list[threading.Thread] = []
        self._request_id = 0
        self._last_headline: str | None = None
        self.pilot: Pilot | None = None
        self.stalls: StallWatch | None = None

    def request_knob(self, name: str, value: Any, trial: bool = False) -> str | None:
        """Validate a change against the advertised knob and send it; returns why not, or None.
        A ``trial`` (the autopilot's, --try's) is undone by the hook if this monitor leaves
        before it is reverted or kept (``keep_trials``)."""
        state = self.session.knob(name)
        if state is None:
            knobs = describe_knobs(self.session.snapshot().knobs)
            return f"no knob named {name!r}; this job's knobs: {knobs}"
        if state.unavailable:
            return f"{name}: {state.unavailable}"
        try:
            value = wire.parse_knob(state.spec, value)
        except ValueError as error:
            return str(error)
        self._request_id += 1
        self.session.apply(events.KnobRequested(name, value))
        # Several ranks: each applies it after this same step (None: at the next boundary).
        at_step = self.session.common_step(RANKS_AHEAD_S, RANKS_AHEAD_MIN_STEPS, time.time())
        frame = wire.SetKnob(self._request_id, name, value, at_step, trial=trial or None)
        self.client.send(frame.encode())
        return None

    def keep_trials(self, names: Sequence[str]) -> None:
        """The autopilot kept these trials: the job keeps them when this monitor leaves."""
        self.client.send(wire.KeepTrials(list(names)).encode())

    def _request_trial(self, name: str, value: Any) -> str | None:
        return self.request_knob(name, value, trial=True)

    def start_pilot(
        self,
        tries: Sequence[tuple[tuple[str, str], ...]] = (),
        budget_s: float = DEFAULT_BUDGET_S,
    ) -> Pilot:
        """The autopilot (or, with ``tries``, the --try survey), ticking on its own thread."""
        pilot = Pilot(
            self.session, self._request_trial, self.window_s, tries, budget_s, keep=self.keep_trials
        )
        self.pilot = pilot
        told = [False]

        def tick() -> None:
            pilot.tick()
            if pilot.status().done and not told[0]:  # a job waiting on it may finish now
                told[0] = True
                self.client.send(wire.AutopilotDone().encode())

        self._spawn("autopilot", lambda: self._every(PILOT_PERIOD_S, tick))
        return pilot

    def trial_under_way(self) -> str | None:
        """The change the autopilot or --try is trying now (the job undoes it if we leave)."""
        if self.pilot is None:
            return None
        status = self.pilot.status()
        return next((t.change for t in status.trials if t.decision == "trying"), None)

    def toggle_autopilot(self) -> str:
        """The Knobs tab's key: start the autopilot, or stop it keeping the settings in force."""
        if self.pilot is not None and not self.pilot.status().done:
            self.pilot.stop()
            return "autopilot stopped: the settings in force are kept"
        if not any(k.role for k in self.session.snapshot().knobs):
            return "the autopilot needs knobs with a role (docs/knobs.md): this script has none"
        self.start_pilot()
        return "autopilot started: it follows the advice on the declared knobs"

    def forget_sockets(self) -> None:
        """Remove the sockets of this job's processes that have ended: a hook killed by a
        signal (SIGTERM, SIGKILL) never removes its own."""
        with contextlib.suppress(OSError, wire.UnsafeRuntimeDir):
            directory = wire.runtime_dir(create=False)
            for pid in self.session.hooked_pids() | {self.root_pid}:
                path = wire.socket_path(pid, directory)
                if path.exists() and not wire.process_exists(pid):
                    path.unlink()

    def scan_syncs(self) -> str:
        """Ask every hooked process to run a sync scan on its next step; what will happen."""
        snap = self.session.snapshot()
        if not snap.hooked:
            return "sync scans need the hook: this job runs without it (docs/advisor.md)"
        model = self.session.facts(wire.Model)
        if model and model[-1].cuda is False:
            return "the job runs on the CPU: it has no host-device syncs to scan"
        self.client.send(wire.ScanSyncs().encode())
        return "sync scan requested: the next step is scanned (file:line of each sync)"

    def watch_stalls(self, folder: Callable[[int], Path], after_s: float | None) -> None:
        """Dump every rank's stacks and collective once no rank has stepped for ``after_s``
        (None: only on request, ``dump_stall``)."""
        stalls = self.stalls = StallWatch(self.session, self.client, folder, after_s)
        self._spawn("stalls", lambda: self._every(STALL_PERIOD_S, stalls.tick))

    def dump_stall(self) -> str:
        """The TUI's key: dump now, stalled or not; what was written."""
        if self.stalls is None or not self.session.hooked_pids():
            return "a stall dump needs hooked processes (the hook): none yet"
        stalls = self.stalls
        threading.Thread(target=stalls.dump, name="gputop-train-stall-dump", daemon=True).start()
        return "stall dump requested: each rank's stacks and collective go to the session folder"

    def where_waiting(self) -> str | None:
        """A job that does not stop: the stall dump, now, and where each rank waits in one
        line; at most STOP_DUMP_S (py-spy on a rank in the GPU driver can take long), the
        stop goes on after it whatever the dump's state."""
        if self.stalls is None or not self.session.hooked_pids():
            return None
        stalls = self.stalls
        found: list[Path] = []
        dumping = threading.Thread(
            target=lambda: found.append(stalls.dump()), name="gputop-train-stall-dump", daemon=True
        )
        dumping.start()
        dumping.join(STOP_DUMP_S)
        if not found:
            return f"the stall dump is still being written after {STOP_DUMP_S:g} s"
        return where_line(stalls.last, found[0])

    def start(self) -> None:
        # Unrecorded: the recording's header holds the count (cli/run.py).
        self.session.apply(events.CoresCounted(os.cpu_count()), record=False)
        for sampler in self.samplers:
            try:
                sampler.open(self.session)
            except SamplerUnavailable as error:
                self.session.apply(events.NoticeAdded(str(error)))
                continue
            self._spawn(sampler.name, self._sampler_loop(sampler))
        self._spawn("hook-client", self._client_loop)
        self._spawn("findings", lambda: self._every(FINDINGS_PERIOD_S, self._note_findings))

    def stop(self) -> None:
        self._stop.set()
        self.client.wake()  # its poll would otherwise end only at the next discovery
        for thread in self._threads:
            thread.join(timeout=2.0)
        self.client.close()

    def check_schedule(
        self,
        schedule: Sequence[tuple[int, dict[str, str]]],
        say: Callable[[str], None] | None = None,
    ) -> None:
        """Say at once, in the Log and headless notes (and to ``say``: headless, stderr),
        which --schedule entries the job's knobs refuse; the hook's refusal of the same entry
        at its step is then not said again (issue 39: at the end, twice)."""

        def check() -> None:
            while not self._stop.wait(SCHEDULE_CHECK_PERIOD_S):
                snap = self.session.snapshot()
                if not knobs_known(snap) and not snap.job.running:
                    return  # a job that ended before declaring its knobs: nothing to check
                if knobs_known(snap):
                    said = self.client.said_schedule_refusals
                    for name, problem in schedule_problems(snap, schedule):
                        if say is not None:
                            say(problem)
                        if name not in said:  # the hook may have refused it already
                            said.add(name)
                            self.session.apply(events.NoticeAdded(problem))
                    return

        self._spawn("schedule-check", check)

    def close_job(
        self,
        exit_code: int | None,
        ended_at: float,
        read_output: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        """The job exited: read its hook's last frames, then its last output (``read_output``:
        the lines to keep with the end), mark the session, and remove the sockets its killed
        processes left. The TUI's and headless's one way to end a job's session."""
        self.drain(JOB_END_DRAIN_S)
        self.fold_in_recorded_steps()
        tail = tuple(read_output())
        self.session.apply(events.JobEnded(exit_code, tail, at=ended_at))
        self.forget_sockets()

    def fold_in_recorded_steps(self) -> None:
        """Take the step rows the hooks appended to the recording that this monitor never
        read: on a busy machine the yielding monitor may reach a short job's hook only after
        the hook stopped waiting for it (hook/agent.py WAIT_FOR_MONITOR_S), and the summary
        said 0 steps of a job that trained (issue 39). Rows already held are skipped by the
        session; none is recorded again."""
        if self.recording is None:
            return
        with contextlib.suppress(OSError, reader.UnreadableRecording):
            for rows in reader.step_rows(self.recording, self.session.steps_taken()):
                self.session.apply(rows, record=False)

    def drain(self, seconds: float) -> None:
        """Keep reading hook frames for a moment after the job ended (its last steps)."""
        deadline = threading.Event()
        timer = threading.Timer(seconds, deadline.set)
        timer.start()
        while not deadline.is_set() and self.client.connected_pids:
            deadline.wait(0.05)
        timer.cancel()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"gputop-train-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _sampler_loop(self, sampler: Sampler) -> Callable[[], None]:
        def run() -> None:
            errors = 0
            try:
                while not self._stop.is_set():
                    if sampler.period_s and self._stop.wait(self._period(sampler)):
                        break
                    try:
                        sampler.sample(self.session, self._stop)
                    except SamplerUnavailable as error:
                        self.session.apply(events.NoticeAdded(str(error)))
                        return
                    except Exception as error:  # a sampler bug must not end the session
                        errors += 1
                        if errors <= MAX_ERROR_NOTICES:
                            self.session.apply(
                                events.NoticeAdded(f"{sampler.name} sampler error: {error!r}")
                            )
                        if not sampler.period_s:
                            self._stop.wait(1.0)  # a blocking sampler that fails must not spin
            finally:
                sampler.close()

        return run

    def _period(self, sampler: Sampler) -> float:
        busy = self.session.system_cpu_pct()
        saturated = busy is not None and busy >= SATURATED_CPU_PCT
        stretch = SATURATED_STRETCH if sampler.cost == COSTLY and saturated else 1.0
        return sampler.period_s * stretch

    def _every(self, period_s: float, action: Callable[[], None]) -> None:
        while not self._stop.wait(period_s):
            try:
                action()
            except Exception as error:  # a bug here must not end the session
                self.session.apply(events.NoticeAdded(f"monitor error: {error!r}"))

    def _note_findings(self) -> None:
        """Record the findings when the headline changes (the record's view of the advice)."""
        found = [finding_dict(f) for f in view_of(self.session.snapshot(self.window_s)).findings]
        headline = found[0]["id"] if found else None
        if headline != self._last_headline:
            self._last_headline = headline
            self.session.apply(events.FindingsShown(tuple(found)))

    def _client_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.client.poll()
            except Exception as error:
                self.session.apply(events.NoticeAdded(f"hook client error: {error!r}"))
                self._stop.wait(0.5)
