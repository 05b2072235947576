"""A simulated job for the autopilot's tests: scripted findings, a step time that depends on
the knobs, changes applied at step boundaries as the hook applies them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputop_train import events
from gputop_train.advise.rules import Change, Finding
from gputop_train.autopilot.pilot import Pilot
from gputop_train.session.model import Session
from gputop_train.wire import LATE_FOR_STEP, parse_knob
from tests.support.clock import ManualClock

PID = 7
KNOBS: list[dict[str, Any]] = [
    {"name": "num_workers", "kind": "int", "value": 0, "min": 0, "max": 16, "role": "workers"},
    {
        "name": "precision",
        "kind": "choice",
        "value": "fp32",
        "choices": ["fp32", "bf16"],
        "role": "precision",
    },
    {"name": "compile", "kind": "bool", "value": False, "role": "compile"},
]


class SimulatedJob:
    """Steps whose time ``step_ms(config)`` gives; a config it raises on is refused at the
    boundary, as a knob callback that raises is; ``oom_after`` configs fail a few steps after
    they applied, and the script reverts them (hook.revert_last_change). ``late`` counts, per
    (knob, value), the requests refused as a rank refuses one that arrives past its step."""

    def __init__(
        self,
        step_ms: Callable[[dict[str, Any]], float],
        oom: Callable[[dict[str, Any]], bool] = lambda config: False,
        declare: bool = True,
        late: dict[tuple[str, Any], int] | None = None,
    ) -> None:
        self.clock = ManualClock(1_000_000.0)
        self.session = Session(command=("python", "train.py"), clock=self.clock)
        self.session.apply(events.ProcessHello.of(PID, {"rank": None, "argv": ["train.py"]}))
        if declare:  # else the test declares them when the script would (``declare_knobs``)
            self.declare_knobs()
        self.config = {k["name"]: k["value"] for k in KNOBS}
        self._step_ms, self._oom = step_ms, oom
        self._queue: list[tuple[str, Any]] = []
        self._step, self._seq = 0, 0
        self._failed_config: dict[str, Any] | None = None
        self.late = dict(late or {})

    def declare_knobs(self, knobs: list[dict[str, Any]] = KNOBS) -> None:
        self.session.apply(events.KnobsDeclared(PID, tuple(knobs)))

    def request(self, name: str, value: Any) -> str | None:
        spec = next(k for k in KNOBS if k["name"] == name)
        value = parse_knob(spec, value)
        self.session.apply(events.KnobRequested(name, value))
        self._queue.append((name, value))
        return None

    def run(self, seconds: float) -> None:
        end = self.clock.now + seconds
        while self.clock.now < end:
            self._one_step()

    def _one_step(self) -> None:
        step_ms = self._step_ms(self.config)
        self.clock.now += step_ms / 1000.0
        self._step += 1
        row = [self._step, self.clock.now, step_ms, 0.0, 32, 1, None, None, None, None]
        self.session.apply(events.StepRows(PID, (row,)))
        if self._oom(self.config) and self._failed_config is None:
            self._failed_config = dict(self.config)
            self._revert_last()
        for name, value in self._queue:
            previous = self.config[name]
            if self.late.get((name, value), 0) > 0:
                self.late[(name, value)] -= 1
                late = f"{LATE_FOR_STEP} {self._step - 1}, the step every rank applies it at"
                self._ack(name, previous, previous, ok=False, error=late)
                continue
            trial = {**self.config, name: value}
            try:
                self._step_ms(trial)
            except ValueError as error:
                self._ack(name, previous, value, ok=False, error=str(error))
                continue
            self.config = trial
            self._last = (name, previous, value)
            self._ack(name, value, previous, ok=True)
        self._queue.clear()

    def _revert_last(self) -> None:
        name, previous, failed = self._last
        self.config[name] = previous
        self._ack(name, previous, failed, ok=False, error="OutOfMemoryError", reverted=True)

    def _ack(self, name: str, value: Any, previous: Any, ok: bool, **extra: Any) -> None:
        self._seq += 1
        frame = {"seq": self._seq, "name": name, "value": value, "previous": previous}
        frame.update(ok=ok, step=self._step, t=self.clock.now, **extra)
        self.session.apply(events.KnobOutcome.of(PID, frame))


def scripted(*changes: Change) -> Callable[[Any], list[Finding]]:
    """An advisor that proposes ``changes``, one finding each, in that order."""
    found = [
        Finding(f"finding.{c.role}", c.role, (), "do it", None, 1.0 - i / 10, 2.0, changes=(c,))
        for i, c in enumerate(changes)
    ]
    return lambda observation: found


def fly(job: SimulatedJob, pilot: Pilot, seconds: float = 300.0) -> None:
    """Run the job and tick the pilot once a simulated second, until it is done."""
    for _ in range(int(seconds)):
        job.run(1.0)
        pilot.tick()
        if pilot.status().done:
            return


def speeds(**step_ms_by_value: float) -> Callable[[dict[str, Any]], float]:
    """Step time: 100 ms, times the factor of each knob value named ``knob__value``."""

    def step_ms(config: dict[str, Any]) -> float:
        ms = 100.0
        for key, factor in step_ms_by_value.items():
            knob, _, value = key.partition("__")
            if str(config[knob]).lower() == value:
                ms *= factor
        return ms

    return step_ms
