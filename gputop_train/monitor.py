"""Runs the samplers and the hook client off the UI thread, feeding one session."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from . import wire
from .advise.rules import findings
from .autopilot.pilot import Pilot
from .client import HookClient
from .collect.nvml import NvmlSampler, NvmlUnavailable
from .collect.procs import ProcessSampler
from .collect.stacks import StackSampler, StacksUnavailable
from .report import finding_dict
from .session.model import DEFAULT_WINDOW_S, Session

# NVML utilization at 10 Hz, as in the reference measurements (optimizations.md).
GPU_PERIOD_S = 0.1
PROCESS_PERIOD_S = 1.0
FINDINGS_PERIOD_S = 5.0
PILOT_PERIOD_S = 1.0


class Monitor:
    """Owns the sampler threads for one job; ``stop()`` joins them."""

    def __init__(
        self,
        session: Session,
        root_pid: int,
        nvml: Any = None,
        psutil_module: Any = None,
        gpu_period_s: float = GPU_PERIOD_S,
        process_period_s: float = PROCESS_PERIOD_S,
        stacks: StackSampler | None = None,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        self.session = session
        self.window_s = window_s  # the live window the user chose: the record's findings too
        self._stop = threading.Event()
        self._gpu_period_s = gpu_period_s
        self._process_period_s = process_period_s
        self.nvml = NvmlSampler(nvml)
        self.procs = ProcessSampler(root_pid, session.hooked_pids, psutil_module)
        self.client = HookClient(session, lambda: self.procs.pids() | {root_pid})
        self.stacks = stacks
        self._threads: list[threading.Thread] = []
        self._request_id = 0
        self._last_headline: str | None = None
        self.pilot: Pilot | None = None

    def request_knob(self, name: str, value: Any) -> str | None:
        """Validate a change against the advertised knob and send it; returns why not, or None."""
        state = self.session.knob(name)
        if state is None:
            return f"no knob named {name!r}"
        try:
            value = wire.parse_knob(state.spec, value)
        except ValueError as error:
            return str(error)
        self._request_id += 1
        self.session.knob_requested(name, value)
        self.client.send(wire.encode(wire.SET_KNOB, id=self._request_id, name=name, value=value))
        return None

    def start_pilot(
        self, tries: list[tuple[tuple[str, str], ...]] | None = None, budget_s: float = 600.0
    ) -> Pilot:
        """The autopilot (or, with ``tries``, the --try survey), ticking on its own thread."""
        pilot = Pilot(self.session, self.request_knob, self.window_s, tries or (), budget_s)
        self.pilot = pilot
        self._spawn("autopilot", lambda: self._every(PILOT_PERIOD_S, pilot.tick))
        return pilot

    def scan_syncs(self) -> None:
        """Ask every hooked process to run a sync scan on its next step."""
        self.client.send(wire.encode(wire.SCAN_SYNCS))

    def start(self) -> None:
        self.session.cpu_count = os.cpu_count()
        try:
            names = self.nvml.open()
            self.session.set_gpus(names, driver=self.nvml.driver)
            self._spawn("gpu", self._gpu_loop)
        except NvmlUnavailable as error:
            self.session.set_gpus([], error=str(error))
        self._sample_procs()
        self._spawn("procs", lambda: self._every(self._process_period_s, self._sample_procs))
        self._spawn("hook-client", self._client_loop)
        self._spawn("findings", lambda: self._every(FINDINGS_PERIOD_S, self._note_findings))
        if self.stacks is not None:
            self._spawn("stacks", self._stacks_loop)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self.client.close()

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

    def _every(self, period_s: float, action: Callable[[], None]) -> None:
        while not self._stop.wait(period_s):
            try:
                action()
            except Exception as error:  # a sampler bug must not end the session
                self.session.add_notice(f"sampler error: {error!r}")

    def _gpu_loop(self) -> None:
        try:
            self._every(self._gpu_period_s, self._sample_gpus)
        finally:
            self.nvml.close()

    def _sample_gpus(self) -> None:
        self.session.add_gpu_samples(self.nvml.sample())

    def _sample_procs(self) -> None:
        self.session.set_processes(self.procs.sample(), self.procs.system_cpu_pct)

    def _stacks_loop(self) -> None:
        """py-spy windows back to back, until the monitor stops or py-spy cannot go on."""
        assert self.stacks is not None
        while not self._stop.is_set():
            try:
                shares = self.stacks.sample(self._stop)
            except StacksUnavailable as error:
                self.session.add_notice(f"stack sampling stopped: {error}")
                return
            except Exception as error:  # a sampler bug must not end the session
                self.session.add_notice(f"stack sampler error: {error!r}")
                return
            if shares is not None:
                self.session.set_stack_shares(shares)
            else:
                self._stop.wait(1.0)  # nothing sampled (the job ended?): do not spin

    def _note_findings(self) -> None:
        """Record the findings when the headline changes (the record's view of the advice)."""
        observation = self.session.snapshot(self.window_s).observation
        found = [finding_dict(f) for f in findings(observation)]
        headline = found[0]["id"] if found else None
        if headline != self._last_headline:
            self._last_headline = headline
            self.session.note_findings(found)

    def _client_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.client.poll(0.1)
            except Exception as error:
                self.session.add_notice(f"hook client error: {error!r}")
                self._stop.wait(0.5)
