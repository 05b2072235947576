"""One real run shared by the tests that read it, across xdist workers.

Why: a monitored torchrun job cost 18-22 s of CPU on the 2-core dev box (2026-11-27, the
suite's per-test CPU; the agent and each rank import torch), and some tests differ only in
what they read from the same run (an unslowed DDP job: no straggler named; each rank hooked
and its samples adding up). The first test to ask makes the run under a file lock; the others
wait for it and read its result (pytest-xdist's "session fixture once" recipe). A run that
fails is made again by the next test that asks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock


def _session_root(factory: pytest.TempPathFactory) -> Path:
    """A folder this test session's workers share, and no other session sees."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(
    factory: pytest.TempPathFactory, key: object, make: Callable[[Path], Any]
) -> tuple[Any, Path]:
    """``make(folder)``'s JSON-able result and its folder, made once per session for ``key``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    root = _session_root(factory)
    folder = root / f"shared-{digest}"
    with FileLock(str(root / f"shared-{digest}.lock")):
        result_file = folder / "result.json"
        if result_file.exists():
            return json.loads(result_file.read_text()), folder
        folder.mkdir(exist_ok=True)
        result = make(folder)
        result_file.write_text(json.dumps(result))
        return result, folder
