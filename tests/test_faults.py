"""Faults the job must never pay for (issue 13): a lost terminal, a full disk, unsafe or
impossible paths, corrupt recordings, and the smaller ones. The listener's attacks are in
test_attacks.py, its unit checks in test_hook_robustness.py, the wire's in test_wire.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop_train import events, wire
from gputop_train.cli import main as cli_main
from gputop_train.job import relay as relay_module
from gputop_train.job.launched import start_job
from gputop_train.job.relay import relay
from gputop_train.record import reader
from gputop_train.record.files import write_private
from gputop_train.record.recorder import Recorder
from gputop_train.session.model import Session
from tests.support import shared_runs
from tests.support.hooked import hooked_child
from tests.support.paths import REPO, SCENARIOS
from tests.support.terminal import Terminal
from tests.support.waiting import wait_until

GPUTOP = [sys.executable, "-m", "gputop_train"]


def _gputop(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUTOP, *args], capture_output=True, text=True, cwd=REPO, timeout=180, **kwargs
    )


# 1. Headless: losing the terminal must not kill the job, and the summary is still written.


@pytest.mark.torch
def test_a_lost_terminal_leaves_the_job_training_and_the_summary_written(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    stem = tmp_path / "lost"
    terminal = Terminal([*GPUTOP, "--headless", "--record", str(stem), str(SCENARIOS), "forever"])
    monitor = terminal.process
    job_pid = hooked_child(monitor.pid)
    terminal.hang_up()  # the SSH connection drops: writes to the terminal now fail (EIO) ...
    monitor.send_signal(signal.SIGHUP)  # ... and the kernel hangs up the session
    try:
        assert monitor.wait(timeout=60) == 0
        assert Path(f"{stem}.summary.json").is_file()
        log = Path(f"{stem}.log")
        size = log.stat().st_size
        # The job goes on training after the monitor has gone: its output (a line every ten
        # steps) still reaches its log.
        wait_until(lambda: log.stat().st_size > size, what="the job's log grew")
        os.kill(job_pid, 0)  # still running (raises if gone)
    finally:
        os.kill(job_pid, signal.SIGINT)
    json.loads(Path(f"{stem}.summary.json").read_text())


# 6. A full disk: the job's writes never fail, the recorder stops with one notice.


def test_a_full_disk_under_the_log_never_fails_the_jobs_writes(tmp_path: Path) -> None:
    full = os.open("/dev/full", os.O_WRONLY)
    code = "import sys\nfor n in range(20000): print('line', n, 'x' * 60)\nprint('done')"
    try:
        job = start_job([sys.executable, "-c", code], log_fd=full)
    finally:
        os.close(full)
    assert job.wait() == 0  # every print succeeded although nothing could be written


def test_the_relay_drops_and_counts_what_the_log_cannot_take_and_says_so_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source_read, source_write = os.pipe()
    log_path = tmp_path / "log"
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o600)
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, log)  # the disk is full ...
    attempts: list[tuple[bytes, bool]] = []
    write_all = relay_module._write_all

    def observed_write(fd: int, data: bytes) -> bool:  # the real write, and what it returned
        written = write_all(fd, data)
        attempts.append((bytes(data), written))
        return written

    monkeypatch.setattr(relay_module, "_write_all", observed_write)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(relay(source_read, log)))
    thread.start()
    os.write(source_write, b"lost line\n")
    wait_until(lambda: (b"lost line\n", False) in attempts, what="the relay's failed write")
    os.dup2(os.open(log_path, os.O_WRONLY | os.O_APPEND), log)  # ... and has room again
    os.write(source_write, b"kept line\n")
    os.close(source_write)
    thread.join(timeout=10)
    assert result == [0]
    text = log_path.read_text()
    assert "10 bytes of output lost" in text and text.endswith("kept line\n")


def test_the_recorder_stops_on_a_full_disk_with_one_notice_and_bounded_memory(
    tmp_path: Path,
) -> None:
    notices: list[str] = []
    recorder = Recorder(tmp_path / "r.jsonl", {"command": ["x"]}, on_failure=notices.append)
    recorder.record("notice", {"text": "written before the disk filled"})
    recorder._flush()
    os.dup2(os.open("/dev/full", os.O_WRONLY), recorder._fd)  # the disk fills up
    for n in range(300_000):
        recorder.record("steps", {"pid": 1, "rows": [[n]]})
        if n % 50_000 == 0:
            recorder._flush()
    recorder.close()
    assert len(notices) == 1 and "the disk is full" in notices[0]
    assert recorder._pending == [] and recorder.dropped_lines > 0
    read_back = reader.read(tmp_path / "r.jsonl")
    assert read_back.events[0]["text"] == "written before the disk filled"


# 7. Files: private, never through a symlink; runtime directories that cannot work say why.


def _recorded(factory: pytest.TempPathFactory) -> Path:
    """A short headless session recorded under the returned stem: one run for the tests that
    only read it."""

    def make(folder: Path) -> str:
        stem = folder / "recorded"
        result = _gputop(
            "--headless", "--record", str(stem), str(SCENARIOS), "sleepy", "steps=5",
            "batch_ms=0", "step_ms=1",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return str(stem)

    return Path(shared_runs.once(factory, "a recorded 5-step session", make)[0])


def _summary_in_process(path: Path) -> tuple[int, str, str]:
    """``gputop-train summary PATH`` run by the CLI's own entry point in this process (a
    subprocess per recording cost 0.3-0.6 s of CPU to start): its exit code and output; an
    exception escaping it fails the test, as a traceback would."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(["summary", str(path)])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.mark.torch
def test_recordings_and_logs_are_private(tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("torch")
    stem = _recorded(tmp_path_factory)
    for suffix in (".jsonl", ".log", ".summary.md", ".summary.json", ".svg"):
        mode = stat.S_IMODE(Path(f"{stem}{suffix}").stat().st_mode)
        assert mode == 0o600, (suffix, oct(mode))


def test_a_summary_never_writes_through_a_symlink_planted_beside_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = tmp_path / "run.summary.md"
    planted.symlink_to(victim)
    write_private(planted, "the summary")
    assert victim.read_text() == "precious"
    assert not planted.is_symlink() and planted.read_text() == "the summary"
    assert stat.S_IMODE(planted.stat().st_mode) == 0o600


def test_a_runtime_dir_taken_by_something_else_names_the_way_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    monkeypatch.setenv(wire.RUNTIME_DIR_ENV, str(taken))
    with pytest.raises(wire.UnsafeRuntimeDir, match=wire.RUNTIME_DIR_ENV):
        wire.runtime_dir()
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    monkeypatch.setenv(wire.RUNTIME_DIR_ENV, str(other))
    real_uid = os.getuid()
    monkeypatch.setattr(wire.os, "getuid", lambda: real_uid + 4242)  # someone else made it
    with pytest.raises(
        wire.UnsafeRuntimeDir, match=f"another user created it.*{wire.RUNTIME_DIR_ENV}"
    ):
        wire.runtime_dir()


def test_the_runtime_dir_name_carries_the_uid_even_under_a_shared_xdg_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(wire.RUNTIME_DIR_ENV)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert wire.runtime_dir().name == f"gputop-train-{os.getuid()}"


def test_a_socket_path_too_long_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    env = {**os.environ, wire.RUNTIME_DIR_ENV: str(deep)}
    result = _gputop("--headless", "--no-record", "--", "true", env=env)
    assert result.returncode == 2
    assert "over the 103 a Unix socket allows" in result.stderr
    assert wire.RUNTIME_DIR_ENV in result.stderr and "Traceback" not in result.stderr


# 8. Bad input: --record places that cannot work, corrupt recordings.


@pytest.mark.parametrize(
    ("place", "says"),
    [
        ("{tmp}/missing/run", "no directory"),
        ("{tmp}/readonly/run", "not writable"),
        ("/proc/self/run", "not writable"),
        ("/dev/full", "a device or a pipe"),
        ("{tmp}", "a directory"),
        ("{tmp}/used", "exists"),
    ],
    ids=["missing-parent", "read-only", "proc", "dev-full", "directory", "reused"],
)
def test_a_record_place_that_cannot_work_is_one_line_and_starts_nothing(
    tmp_path: Path, place: str, says: str
) -> None:
    (tmp_path / "readonly").mkdir(mode=0o500)
    (tmp_path / "used.jsonl").write_text("")
    if os.geteuid() == 0 and "readonly" in place:
        pytest.skip("root writes into a read-only directory")
    marker = tmp_path / "started"
    result = _gputop(
        "--headless", "--record", place.format(tmp=tmp_path), "--", "touch", str(marker)
    )
    assert result.returncode == 2
    assert says in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not marker.exists()


def _corruptions(good: list[str]) -> dict[str, list[str]]:
    """Twenty ways a recording goes bad: torn, truncated, wrong types, garbage, hostile."""
    meta, events = good[0], good[1:]
    steps = next(line for line in events if '"steps"' in line)
    gpu = json.dumps({"kind": "gpu", "t": 2.0, "samples": [{"index": "zero"}]})
    return {
        "torn-last-line": [*good[:-1], good[-1][: len(good[-1]) // 2]],
        "truncated-half": good[: len(good) // 2],
        "meta-only": [meta],
        "no-meta": events,
        "newer-format": [meta.replace('"format": 1', '"format": 99'), *events],
        "binary": [*good, "\x00ÿþ garbage"],
        "not-objects": [*good, "[1,2,3]", "42", '"text"', "null"],
        "nan-times": [*good, '{"kind": "steps", "t": NaN, "pid": 1, "rows": []}'],
        "huge-numbers": [*good, '{"kind": "steps", "t": 1e400, "pid": 1, "rows": [[1e400]]}'],
        "rows-not-lists": [*good, steps.replace('"rows": [', '"rows": {"a": [') + "}"],
        "wrong-row-types": [*good, '{"kind":"steps","t":3.0,"pid":1,"rows":[["a","b",{}]]}'],
        "wrong-pid": [*good, '{"kind":"steps","t":3.0,"pid":"one","rows":[[1,2,3]]}'],
        "gpu-garbage": [*good, gpu],
        "procs-garbage": [*good, '{"kind":"procs","t":3.0,"samples":"lots"}'],
        "knob-garbage": [*good, '{"kind":"knob_outcome","t":3.0,"pid":1,"frame":[1]}'],
        "hello-garbage": [*good, '{"kind":"hello","t":3.0,"pid":1,"frame":{"argv":7}}'],
        "deeply-nested": [*good, '{"kind":"fact","t":3.0,"x":' + "[" * 50000 + "]" * 50000 + "}"],
        "unknown-kinds": [*good, '{"kind":"from-the-future","t":3.0}'],
        "job-ended-garbage": [*good, '{"kind":"job_ended","t":3.0,"exit_code":"zero"}'],
        "shuffled-times": [meta, *list(reversed(events))],
    }


@pytest.mark.torch
def test_twenty_corrupt_recordings_never_traceback(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("torch")
    good = Path(f"{_recorded(tmp_path_factory)}.jsonl").read_text().splitlines()
    cases = _corruptions(good)
    assert len(cases) == 20
    for name, lines in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        code, out, err = _summary_in_process(path)
        assert "Traceback" not in err, (name, err)
        if name in ("no-meta", "newer-format"):
            assert code == 2 and err.count("\n") == 1, (name, err)
        else:
            assert code == 0 and "steps" in out, (name, err)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.one_of(
            st.text(max_size=80),
            st.builds(
                lambda kind, t, extra: json.dumps({"kind": kind, "t": t, **extra}),
                st.sampled_from(
                    [
                        "steps",
                        "gpu",
                        "procs",
                        "hello",
                        "knob_outcome",
                        "fact",
                        "notice",
                        "job_ended",
                        "knobs",
                        "stacks",
                        "reading",
                        "autopilot",
                        "dropped",
                    ]
                ),
                st.floats(min_value=0, max_value=1e9),
                st.dictionaries(
                    st.sampled_from(["pid", "rows", "samples", "frame", "text", "exit_code"]),
                    st.recursive(
                        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                        lambda inner: (
                            st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=8), inner, max_size=4)
                        ),
                        max_leaves=12,
                    ),
                ),
            ),
        ),
        max_size=12,
    )
)
def test_the_reader_and_replay_take_any_lines(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "fuzz.jsonl"
    meta = json.dumps({"kind": "meta", "t": 1.0, "format": 1, "command": ["x"]})
    path.write_text("\n".join([meta, *lines]) + "\n")
    recording = reader.read(path)
    session = reader.replay_all(recording)
    session.snapshot(60.0, with_phases=True)


# 9. Every knob outcome used to re-record the whole phase list (2000 toggles: 26 MB).


def test_a_phase_event_records_the_phase_that_changed_not_the_whole_list() -> None:
    recorded: list[tuple[str, dict[str, Any]]] = []
    session = Session()
    session.listener = lambda item: recorded.append(events.encode(item))
    session.apply(events.ProcessHello.of(1, {"type": "hello", "pid": 1, "argv": ["x"]}))
    session.apply(
        events.KnobsDeclared(1, ({"name": "w", "kind": "int", "value": 0, "min": 0, "max": 9},))
    )
    for n in range(1, 2001):
        outcome = {"seq": n, "name": "w", "ok": True, "value": n % 2, "previous": (n + 1) % 2}
        session.apply(events.KnobOutcome.of(1, {**outcome, "step": n * 10, "t": float(n)}))
    phases = [payload for kind, payload in recorded if kind == "phase"]
    assert len(phases) == 2000
    assert all(set(p) == {"phase"} for p in phases)
    assert sum(len(json.dumps(p)) for p in phases) < 2000 * 400  # linear, not quadratic


@pytest.mark.torch
def test_the_tui_whose_terminal_went_away_leaves_at_its_sighup(tmp_path: Path) -> None:
    """The pty is closed and the TUI keeps drawing (every write fails) for seconds before the
    SIGHUP: Textual's output thread died at the first failed write, its queue filled, and the
    main thread blocked in ``Queue.put`` for good, SIGTERM ignored (issue 46, 1 of 2 tries).
    Now the monitor leaves within seconds, with its summaries, and the job runs on."""
    pytest.importorskip("torch")
    stem = tmp_path / "gone"
    terminal = Terminal(
        [*GPUTOP, "--record", str(stem), "--refresh", "0.2", str(SCENARIOS), "forever"]
    )
    monitor = terminal.process
    job_pid = hooked_child(monitor.pid)
    try:
        terminal.read(3.0)  # the TUI is up and drawing
        terminal.hang_up()
        time.sleep(8.0)  # 40 refreshes, each a failed write: more than Textual's queue holds
        monitor.send_signal(signal.SIGHUP)
        assert monitor.wait(timeout=30) == 0
        assert Path(f"{stem}.summary.json").is_file()
        os.kill(job_pid, 0)  # SIGHUP leaves the job running (raises if gone)
    finally:
        if monitor.poll() is None:
            monitor.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(job_pid, signal.SIGINT)
