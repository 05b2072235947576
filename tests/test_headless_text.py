"""Headless text is for humans: every line within a terminal's 100 columns (the JSON stays
whole), a phase table that fits, each note once, and the job's traceback kept in its log
once the reader of the output is gone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.headless import WIDTH, once, phase_table, status_line, summary_text
from gputop_train.views import status_fields, view_of
from tests.support.paths import REPO
from tests.support.sessions import JOB_PID, scripted_session
from tests.support.waiting import wait_until


def test_status_lines_fit_100_columns_and_the_json_stays_whole() -> None:
    for with_gpu in (True, False):
        view = view_of(scripted_session(with_gpu=with_gpu).snapshot())
        lines = status_line(view).splitlines()
        assert all(len(line) <= WIDTH for line in lines), lines
        assert lines[0].startswith("[") and all(line.startswith(" ") for line in lines[1:])
        text = " ".join(lines)
        for figure in ("samples/s", "data-wait 33%", "8 workers", "main 71% CPU", "▶ Input-bound"):
            assert figure in text
        # The whole headline is there, wrapped at words, not cut.
        head = view.headline
        assert head is not None and head.action.split()[-1] in text
        fields = status_fields(view)
        assert "\n" not in json.dumps(fields) and fields["findings"][0]["evidence"]


def test_no_gpu_is_one_segment_not_three_na() -> None:
    session = scripted_session(with_gpu=False)
    session.apply(events.StepRows(7, ()))
    line = status_line(view_of(session.snapshot()))
    assert "GPU util N/A" in line  # the hook measured GPU time: the NVML figures say N/A
    empty = status_line(view_of(type(session)(command=("x",)).snapshot()))
    assert "GPU N/A" in empty and "GPU util" not in empty and "mem N/A" not in empty


def test_the_phase_table_fits_and_drops_the_columns_no_phase_has() -> None:
    gpu = phase_table(view_of(scripted_session().snapshot(with_phases=True)))
    assert all(len(line) <= WIDTH for line in gpu), gpu
    assert "GPU util" in gpu[1] and "▶ input.more_workers" in "\n".join(gpu)
    cpu = phase_table(view_of(scripted_session(with_gpu=False).snapshot(with_phases=True)))
    assert "GPU util" not in cpu[1] and "peak mem" not in cpu[1] and "tensor" not in cpu[1]
    assert cpu[1].endswith("headline") and cpu[2].endswith("input.more_workers")
    assert all(len(line) <= WIDTH for line in cpu)


def test_a_long_change_is_cut_in_its_cell_and_given_whole_below_it() -> None:
    session = scripted_session(with_gpu=False)
    value = "gpu-resize-then-normalize-in-bf16"
    outcome = {"seq": 2, "name": "input", "ok": True, "value": value, "previous": "uint8"}
    session.apply(events.KnobOutcome.of(JOB_PID, {**outcome, "step": 820, "t": session.clock()}))
    long = f"input={value}"
    table = phase_table(view_of(session.snapshot(with_phases=True)))
    assert all(len(line) <= WIDTH for line in table)
    assert any("…" in line for line in table) and any(long in line for line in table)


def test_each_note_is_said_once_and_the_gpu_reason_not_twice() -> None:
    reason = "no NVIDIA driver here (NVML Shared Library Not Found)"
    notes = [f"GPU figures are N/A: {reason}", "py-spy is missing", "py-spy is missing"]
    assert once(notes, [reason]) == ["py-spy is missing"]
    session = scripted_session(with_gpu=False)
    for note in notes:
        session.apply(events.NoticeAdded(note))
    text = summary_text(view_of(session.snapshot(with_phases=True)))
    assert text.count(reason) == 1 and text.count("py-spy is missing") == 1
    assert all(len(line) <= WIDTH for line in text.splitlines()), text


def test_a_closed_pipe_keeps_the_jobs_traceback_in_its_log(tmp_path: Path) -> None:
    """``gputop-train --headless train.py | head -2``: the job is stopped as by Ctrl+C, and
    its KeyboardInterrupt traceback goes to its log, not after the pipeline's end."""
    job = "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.05)\n"
    record = tmp_path / "run.jsonl"
    options = ["--headless", "--interval", "0.3", "--record", str(record)]
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", *options, "--", sys.executable, "-c", job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert monitor.stdout is not None and monitor.stderr is not None
    while not monitor.stdout.readline().startswith("["):  # the first status: it runs
        pass
    monitor.stdout.close()  # `| head` is done
    err = monitor.stderr.read()
    monitor.wait(timeout=90)
    assert "the output pipe was closed: stopping the job; its output is in" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    log = Path(re.search(r"its output is in (\S+)", err).group(1))
    # The relay writes the job's last lines.
    wait_until(lambda: "KeyboardInterrupt" in log.read_text(), 30, "the job's last lines")


def test_at_80_columns_text_wraps_at_spaces_never_inside_a_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 39: 100-column lines broke mid-word in an 80-column terminal."""
    view = view_of(scripted_session().snapshot(with_phases=True))
    monkeypatch.setenv("COLUMNS", "10000")
    whole = status_line(view) + "\n" + summary_text(view)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = status_line(view) + "\n" + summary_text(view)
    assert all(len(line) <= 80 for line in narrow.splitlines()), narrow
    # Every word of the narrow text is a word of the wide one: none was cut in two.
    assert set(narrow.split()) <= set(whole.split()), set(narrow.split()) - set(whole.split())
    assert any(len(line) > 80 for line in whole.splitlines())  # there was wrapping to do
