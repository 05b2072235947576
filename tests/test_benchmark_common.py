"""The scaffolding the benchmarks share (benchmarks/common, issue 47): arms in ABBA order, CPU
hogs that are gone when their block ends, and results that say their commit, machine, date and
command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from benchmarks.common.abba import abba_order, abba_rounds
from benchmarks.common.hogs import cpu_hogs
from benchmarks.common.provenance import Provenance, provenance, write_result

ORIGIN = Provenance("abc1234", "no GPU, 2 cores, 1-min load 1.0", "2026-12-05T12:00Z", "python x")


def test_the_arms_alternate_ab_ba_so_a_drift_cancels() -> None:
    ran: list[tuple[int, str]] = []
    rounds = abba_rounds(("plain", "monitored"), 3, lambda arm, index: ran.append((index, arm)))
    assert [arm for _, arm in ran] == [
        "plain",
        "monitored",
        "monitored",
        "plain",
        "plain",
        "monitored",
    ]
    assert [list(r) for r in rounds] == [
        ["plain", "monitored"],
        ["monitored", "plain"],
        ["plain", "monitored"],
    ]
    assert abba_order(1, (1, 2, 3)) == (3, 2, 1)


def test_a_text_result_says_its_provenance_on_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    write_result(path, "figure 1.00\n", ORIGIN)
    first, rest = path.read_text().split("\n", 1)
    assert first == (
        "commit abc1234; machine no GPU, 2 cores, 1-min load 1.0; date 2026-12-05T12:00Z; "
        "command python x"
    )
    assert rest == "figure 1.00\n"


def test_a_json_result_stays_json_and_says_its_provenance_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_result(path, json.dumps({"ratio": 1.0}), ORIGIN)
    assert json.loads(path.read_text()) == {"ratio": 1.0}
    assert (tmp_path / "run.json.meta").read_text() == ORIGIN.line() + "\n"


def test_this_checkouts_provenance_names_a_commit_and_the_command() -> None:
    origin = provenance(["-m", "benchmarks.overhead.busy_box", "--rounds", "4"])
    assert origin.commit.split("+")[0].isalnum() and len(origin.commit) >= 7
    assert f"{os.cpu_count()} cores" in origin.machine
    assert origin.command == "python -m benchmarks.overhead.busy_box --rounds 4"


def test_the_hogs_spin_in_their_block_and_are_gone_after_it() -> None:
    with cpu_hogs(2, seconds=60) as hogs:
        assert len(hogs) == 2 and all(hog.poll() is None for hog in hogs)
    assert all(hog.returncode is not None for hog in hogs)
    # the busy loops too, not only their `timeout`s (each hog is a session of its own)
    sessions = {hog.pid for hog in hogs}
    left = [p for p in psutil.process_iter() if _alive_in(p, sessions)]
    _, alive = psutil.wait_procs(left, timeout=10)  # SIGKILL lands a moment after it is sent
    assert [p for p in alive if _alive_in(p, sessions)] == []


def _alive_in(process: psutil.Process, sessions: set[int]) -> bool:
    try:
        return os.getsid(process.pid) in sessions and process.status() != psutil.STATUS_ZOMBIE
    except (OSError, psutil.Error):
        return False
