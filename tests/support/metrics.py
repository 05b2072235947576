"""The Prometheus exposition of a session, and its samples by name."""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from gputop_train.export.prometheus import JobCollector
from gputop_train.views import view_of


def exposition(session: Any) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(lambda: view_of(session.snapshot(window_s=30.0)), "train"))
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
