"""The Prometheus exposition of a session, and its samples by name."""

from __future__ import annotations

import re
import socket
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from gputop_train.export.identity import JobIdentity
from gputop_train.export.prometheus import JobCollector
from gputop_train.views import view_of

# The job ``train`` on this host, as a monitor of ``python train.py`` names it.
TRAIN = JobIdentity("train", socket.gethostname(), socket.gethostname())


def exposition(session: Any, who: JobIdentity | None = None) -> str:
    """The page the exporter renders for ``session``: job ``train`` on this host unless
    ``who`` says otherwise."""
    who = who or TRAIN
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(lambda: view_of(session.snapshot(window_s=30.0)), who))
    return generate_latest(registry).decode()


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Each sample of ``name``: its labels (sorted pairs) -> value."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match.group(1))))
            found[labels] = float(match.group(2))
    return found
