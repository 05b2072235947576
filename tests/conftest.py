"""Fixtures for every test, and the lanes (helpers shared by test modules are in
tests/support/)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import lanes, timeouts, worker_sessions

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
    # xdist's workers inherit COLUMNS=80 from pytest's terminal, so text mode would wrap at 80
    # in the parallel run and at 100 serially: a test that wants a width sets it itself.
    monkeypatch.delenv("COLUMNS", raising=False)
    return directory


_RUNNER_AUTOGROUP = Path("/proc/self/autogroup")


def _runner_nice() -> int | None:
    try:
        return int(_RUNNER_AUTOGROUP.read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


def pytest_configure(config: pytest.Config) -> None:
    """Hold the runner's session priority (autogroup nice): the suite's monitors lower their
    session's while they run, and the runner's terminal must end as it was (issue 46: it was
    left at nice 10; monitor/priority.py now gives it back, this holds the line). The workers
    run in sessions of their own (tests/support/worker_sessions.py), so in the parallel lanes no
    monitor lowers the runner's session at all."""
    if hasattr(config, "workerinput"):
        worker_sessions.enter_own_session()  # its monitors lower its session, not the runner's
        return
    config.stash[_NICE_KEY] = _runner_nice()
    if getattr(config.option, "numprocesses", None):
        worker_sessions.forward_interrupts()


def pytest_unconfigure(config: pytest.Config) -> None:
    before = config.stash.get(_NICE_KEY, None)
    if before is not None and _runner_nice() != before:
        with contextlib.suppress(OSError):
            _RUNNER_AUTOGROUP.write_text(str(before))
        print(f"\nconftest: the suite left its session's autogroup lowered; put back nice {before}")


_NICE_KEY = pytest.StashKey[int | None]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: object) -> bool | None:
    """A timeout never raised inside pytest's own code (tests/support/timeouts.py)."""
    return timeouts.set_timer(item, settings)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Three test workers for every two cores (``-n auto``, as ``addopts`` sets): with its jobs
    forked and shared, the suite waits about a quarter of its time (on jobs' sleeps, a drop
    timer, a stall), which a third worker fills: 7 min 58 s with 2 workers, 7 min 5 s with 3
    on the 2-core dev box (2026-11-27)."""
    return max(1, len(os.sched_getaffinity(0)) * 3 // 2)


# The two lanes (tests/support/lanes.py): a test that starts no process is marked `fast`
# (`python3 -m pytest -m fast` runs those alone), and one that does start a process anyway
# fails, naming it.
lanes.watch_process_starts()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("solo"):
            continue
        if item.get_closest_marker("process") is None:
            function = item.cls.__name__ if item.cls else item.originalname
            if not lanes.starts_a_process(item.module.__name__, function, tuple(item.fixturenames)):
                item.add_marker(pytest.mark.fast)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    lanes.take_started()  # what earlier tests started is theirs
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if call.when != "teardown" or item.get_closest_marker("fast") is None:
        return
    started = lanes.take_started()
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            "a test of the fast lane started a process: "
            + "; ".join(started)
            + "\nmark it @pytest.mark.process (tests/support/lanes.py says how lanes are read)"
        )
