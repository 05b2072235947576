"""Fixtures for every test (helpers shared by test modules are in tests/support/)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# A suite started in the background of a non-interactive shell (`bash .ci/run &`) inherits
# SIGINT as ignored, and so would every monitor and job it starts: the Ctrl+C tests then
# fail and leave their "forever" jobs running. A handler, unlike "ignored", is not inherited.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The hundreds of monitors and jobs the suite starts each import this checkout's package; with
# PYTHONDONTWRITEBYTECODE set (as some sandboxes and CI images do) each compiled it from source
# again: 0.25 s of CPU a start on the 2-core box (0.77 s with the bytecode, 1.02 s without).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Every job the suite starts runs torch with one intra-op thread, as a test worker has about
# one core: with torch's default (a thread per core), two workers' jobs oversubscribed the
# 2-core box, and a job that trains until a condition is met burnt both threads meanwhile (the
# transformer, diagnosis and shared-machine tests: 75 -> 52 s of CPU, 47 -> 33 s of wall time,
# 2-core dev box, 2026-11-27).
# No test is about torch's own threading; the demo sets its CPU configuration's threads itself.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def private_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own socket directory, so tests never see each other's hooks, and
    its own data directory, so recordings never land in the user's."""
    directory = tmp_path / "run"
    monkeypatch.setenv("GPUTOP_TRAIN_RUNTIME_DIR", str(directory))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return directory


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Three test workers for every two cores (``-n auto``, as ``addopts`` sets): with its jobs
    forked and shared, the suite waits about a quarter of its time (on jobs' sleeps, a drop
    timer, a stall), which a third worker fills: 7 min 58 s with 2 workers, 7 min 5 s with 3
    on the 2-core dev box (2026-11-27)."""
    return max(1, len(os.sched_getaffinity(0)) * 3 // 2)
