"""``gputop-train report``: one self-contained HTML file, quick to open however long the run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gputop_train.reports import downsample
from tests.support import shared_runs
from tests.support.cli import gputop
from tests.support.synthetic_recording import write_synthetic

# The bar for a 1-hour, 8-rank session's report (time: git show
# 6a2d3ea:benchmarks/scale/report_size.py).
MAX_REPORT_BYTES = 5 * 1024 * 1024
# The first test to read the hour's report waits for it to be made (50 s of wall on the quiet
# 2-core box; the report itself may take 300 s beside other work): pytest-timeout's 120 s cut
# that wait short beside two hogs (2026-12-06), so these tests get the report's own deadline.
REPORT_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def hour_of_eight_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Made once for the whole run (about 23 s of CPU on the 2-core dev box: each xdist worker
    that ran one of these tests made its own)."""

    def make(folder: Path) -> str:
        write_synthetic(folder / "hour.jsonl", ranks=8, seconds=3600.0)
        result = gputop("report", str(folder / "hour.jsonl"), timeout=REPORT_TIMEOUT_S)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    said, folder = shared_runs.once(tmp_path_factory, "report of an hour of eight ranks", make)
    page = folder / "hour.report.html"
    assert said == str(page)
    return page, page.read_text()


@pytest.mark.timeout(REPORT_TIMEOUT_S + 60)
def test_an_hour_of_eight_ranks_makes_a_report_under_five_megabytes(
    hour_of_eight_ranks: tuple[Path, str],
) -> None:
    page, _ = hour_of_eight_ranks
    assert page.stat().st_size < MAX_REPORT_BYTES


@pytest.mark.timeout(REPORT_TIMEOUT_S + 60)
def test_the_report_needs_nothing_from_the_network(hour_of_eight_ranks: tuple[Path, str]) -> None:
    _, text = hour_of_eight_ranks
    assert "<script" not in text and "<link" not in text and "<img" not in text
    # SVG's xmlns names are identifiers, never fetched; nothing else may point outside.
    fetched = re.findall(r"""(?:src|href)\s*=\s*["']([^"'#][^"']*)""", text)
    assert fetched == []
    assert "@import" not in text
    assert re.findall(r"url\((?!#)", text) == []  # clip paths point within the page only


@pytest.mark.timeout(REPORT_TIMEOUT_S + 60)
def test_the_report_has_the_summarys_headline_ranks_phases_and_versions(
    hour_of_eight_ranks: tuple[Path, str],
) -> None:
    _, text = hour_of_eight_ranks
    assert "Straggler: rank 3" in text  # the advisor's headline, as the summary has it
    assert text.count("<svg") >= 4  # over the run, ranks, step split, memory
    assert "2: num_workers=8" in text  # the phase, named on the plots and in the table
    for section in ("Ranks (end of run)", "Phases", "Machine and versions", "torch (the job"):
        assert section in text
    assert all(f"rank {r}" in text for r in range(8))
    assert "peak 29." in text  # the memory plot marks its peak (GPU 7's 29.4 GiB)


def test_downsampling_keeps_a_single_spike() -> None:
    t = np.arange(100_000) * 0.01
    values = np.full(len(t), 10.0)
    values[54_321] = 900.0  # one slow step among 100k
    buckets = downsample.extremes(t, values, downsample.edges(0.0, float(t[-1])))
    assert len(buckets.t) == downsample.BUCKETS
    assert np.nanmax(buckets.high) == 900.0 and np.nanmin(buckets.low) == 10.0
    assert np.nanmax(buckets.mean) < 900.0  # the mean alone would hide it


def test_a_missing_plotting_library_is_one_line_with_its_install(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "short.jsonl", ranks=1, seconds=20.0)
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'matplotlib':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from gputop_train.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocker, "report", str(tmp_path / "short.jsonl")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "pip install 'gputop-train[report]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_compare_and_check_run_without_the_plotting_library() -> None:
    code = (
        "import sys, gputop_train.cli.reports, gputop_train.reports.compare, "
        "gputop_train.reports.check\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'textual')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_file_that_is_not_a_recording_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.jsonl").write_text("hello\n")
    result = gputop("report", str(tmp_path / "notes.jsonl"))
    assert result.returncode == 2
    assert "no gputop-train header line" in result.stderr and "Traceback" not in result.stderr
