"""The shape every sampler has, and what it may write to: the Monitor runs each registered
sampler on its own thread (monitor/monitor.py ``default_samplers``); a new one is a class of
this shape and one line there (docs/architecture.md, "Add a sampler")."""

from __future__ import annotations

import threading
from typing import Protocol

from ..events import Event

# Cost tiers: a "cheap" sampler runs at its period whatever the machine does; a "costly" one
# (a scan of every process, a py-spy window) stretches its period while the machine's cores
# are all busy, so that the monitor yields to a job that needs them (docs/benchmarks.md).
CHEAP = "cheap"
COSTLY = "costly"


class SamplerUnavailable(RuntimeError):
    """The sampler cannot run here; the message says why and what to do."""


class Sink(Protocol):
    """What a sampler writes to (the session implements it): one event per sample
    (gputop_train/events.py: GpusFound, GpuSampled, ProcsSampled, StacksSampled, ReadingTaken,
    NoticeAdded)."""

    def apply(self, item: Event) -> None: ...


class Sampler(Protocol):
    name: str
    period_s: float  # between two samples; 0: sample() blocks for its own window
    cost: str  # CHEAP or COSTLY

    def open(self, sink: Sink) -> None:
        """Start; raise SamplerUnavailable (said in the Log tab) if it cannot run here."""
        ...

    def sample(self, sink: Sink, stop: threading.Event) -> None:
        """Take one sample and write it to ``sink``; return early once ``stop`` is set."""
        ...

    def close(self) -> None: ...
