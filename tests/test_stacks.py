"""A job without the hook, sampled with py-spy: parsing, failures said with their fix, and the
figures it feeds (session, advisor, recording, TUI). A fake py-spy plays scripted output."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.advise.rules import findings
from gputop_train.collect.stacks import (
    DATA_WAIT,
    StackSampler,
    StackShares,
    StacksUnavailable,
    category,
    classify,
)
from gputop_train.record.reader import apply
from gputop_train.session.model import Session
from gputop_train.tui.panels import text as panels
from gputop_train.views import view_of

# Trimmed from a real `py-spy record --format raw --idle --threads` of a DataLoader loop.
RAW = """\
thread (6624): MainThread;<module> (loop.py:10) 40
thread (6624): MainThread;<module> (loop.py:8);_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725);_MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py:1507);Queue.get (multiprocessing/queues.py:122) 30
thread (6624): MainThread;<module> (loop.py:11);Module._wrapped_call_impl (torch/nn/modules/module.py:1783);Module._call_impl (torch/nn/modules/module.py:1794);Linear.forward (torch/nn/modules/linear.py:134) 10
thread (6624): MainThread;<module> (loop.py:11);Tensor.backward (torch/_tensor.py:623);backward (torch/autograd/__init__.py:395);_engine_run_backward (torch/autograd/graph.py:1072) 15
thread (6624): MainThread;<module> (loop.py:11);Optimizer.profile_hook_step.<locals>.wrapper (torch/optim/optimizer.py:533);SGD.step (torch/optim/sgd.py:80) 5
thread (6715): QueueFeederThread;_bootstrap (threading.py:1002);Queue._feed (multiprocessing/queues.py:231);Condition.wait (threading.py:327) 249
not a stack line
"""  # noqa: E501


def test_the_training_thread_is_split_into_categories() -> None:
    shares = classify(RAW)
    assert shares is not None
    # The feeder thread has more samples, but no torch work: the main thread trains.
    assert shares.thread == "MainThread (6624)" and shares.samples == 100
    assert shares.shares == {
        DATA_WAIT: 30.0,
        "forward": 10.0,
        "backward": 15.0,
        "optimizer": 5.0,
        "other": 40.0,
    }


def test_nothing_sampled_is_none_not_zero() -> None:
    assert classify("") is None
    assert classify("garbage\n") is None


def test_a_wait_for_data_inside_the_loop_counts_as_data_wait() -> None:
    assert category("<module> (a.py:1);_BaseDataLoaderIter.__next__ (torch/utils/x.py:1)") == (
        DATA_WAIT
    )
    assert category("<module> (a.py:1);train (a.py:9)") == "other"


def fake_py_spy(tmp_path: Path, body: str) -> str:
    """An executable standing in for py-spy: ``body`` is Python, with ``args`` its argv."""
    script = tmp_path / "py-spy"
    script.write_text(f"#!/usr/bin/env python3\nimport sys, time\nargs = sys.argv[1:]\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def write_raw(raw: str) -> str:
    return f"open(args[args.index('--output') + 1], 'w').write({raw!r})"


def test_a_window_of_samples_from_the_recorder(tmp_path: Path) -> None:
    body = f"assert '--idle' in args and '--nonblocking' in args\n{write_raw(RAW)}"
    sampler = StackSampler(4242, fake_py_spy(tmp_path, body), window_s=1.4)
    shares = sampler.sample()
    assert shares is not None and shares.shares[DATA_WAIT] == 30.0
    assert shares.window_s == 1.0  # py-spy records whole seconds


@pytest.mark.parametrize(
    ("stderr", "said"),
    [
        ("Error: Permission denied (os error 13)", "ptrace_scope"),
        ("Error: Failed to find python version from target process", "not a Python process"),
        ("Error: something new", "py-spy failed on PID"),
    ],
)
def test_a_failure_is_said_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: str, said: str
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # a user (root: tests/test_first_hour.py)
    body = f"sys.stderr.write({stderr!r}); sys.exit(1)"
    sampler = StackSampler(os.getpid(), fake_py_spy(tmp_path, body))  # a PID that exists
    with pytest.raises(StacksUnavailable, match=said):
        sampler.check()


def test_no_py_spy_at_all_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gputop_train.collect.stacks.find_py_spy", lambda: None)
    with pytest.raises(StacksUnavailable, match="pip install py-spy"):
        StackSampler(4242).check()


def test_stopping_the_monitor_ends_a_window_early(tmp_path: Path) -> None:
    sampler = StackSampler(4242, fake_py_spy(tmp_path, "time.sleep(30)"), window_s=30)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    assert sampler.sample(stop) is None
    assert time.monotonic() - started < 5


def shares(data_wait: float, window_s: float = 10.0) -> StackShares:
    rest = (100.0 - data_wait) / 4
    return StackShares(
        "MainThread (1)",
        500,
        {DATA_WAIT: data_wait, "forward": rest, "backward": rest, "optimizer": rest, "other": rest},
        window_s,
    )


def test_without_steps_the_advisor_reads_the_wait_from_the_samples() -> None:
    clock = [1000.0]
    session = Session(clock=lambda: clock[0])
    recorded: list[tuple[str, dict]] = []
    session.listener = lambda item: recorded.append(events.encode(item))
    session.apply(events.StacksSampled(shares(60.0)))
    snap = session.snapshot()
    assert snap.stacks is not None and snap.observation is not None
    assert snap.observation.data_wait_source == "py-spy"
    assert snap.steps.data_wait_pct == 60.0 and snap.steps.step_ms_p50 is None  # N/A, not 0
    top = findings(snap.observation)
    assert top and top[0].id.startswith("input.")
    assert any("(py-spy)" in line for line in top[0].evidence)
    assert "data wait" in panels.steps_panel(view_of(snap)).plain
    # The recording carries the window; a replay gets the same figures back.
    replayed = Session(clock=lambda: clock[0])
    for kind, payload in recorded:
        apply(replayed, {"kind": kind, **payload})
    assert replayed.snapshot().steps.data_wait_pct == 60.0


def test_an_old_window_is_not_the_live_figure() -> None:
    clock = [1000.0]
    session = Session(clock=lambda: clock[0])
    session.apply(events.StacksSampled(shares(60.0)))
    clock[0] += 60.0  # py-spy stopped a minute ago
    assert session.snapshot().steps.data_wait_pct is None


def test_a_long_window_stays_the_live_figure_until_the_next_is_due() -> None:
    clock = [1000.0]
    session = Session(clock=lambda: clock[0])
    session.apply(events.StacksSampled(shares(60.0, window_s=30.0)))
    clock[0] += 25.0  # the next 30 s window is not in yet
    assert session.snapshot().steps.data_wait_pct == 60.0
