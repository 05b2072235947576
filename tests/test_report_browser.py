"""The report of real recordings, opened in a real headless Chromium with the network off:
its plots are drawn and its phases marked (docs/recording.md, "report")."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop_train.reports.plots import PHASE_COLOUR
from tests.support import shared_runs, torchrun
from tests.support.browser import blended_pixels_of, chromium, drawn_share, pixels_of, screenshot
from tests.support.cli import gputop
from tests.support.paths import REPO

# Each test waits for a shared run (the demo's 1500 steps, up to 300 s by its own deadline),
# then makes its report and a screenshot: 119 s of wall for the demo's test beside the parallel
# lane at load 5-9 on the 2-core box (2026-12-06), and pytest-timeout's 120 s ended both tests
# before their own deadlines could say which part hung beside two CPU hogs (02:05 that day).
RUN_TIMEOUT_S = 300
REPORT_TIMEOUT_S = 120
pytestmark = [
    pytest.mark.timeout(RUN_TIMEOUT_S + REPORT_TIMEOUT_S + 60),
    pytest.mark.torch,
    pytest.mark.skipif(
        chromium() is None,
        reason="no Chromium (apt-get install chromium; .ci/run installs it)",
    ),
]

# Colours of matplotlib's default cycle: C0 draws the first process's series, C1 the second's.
FIRST, SECOND = "#1f77b4", "#ff7f0e"
# Thresholds: about a third of what a good report drew (2026-11-27, dev box, 1200 px wide):
# the demo's two phase lines across four plots and their names, 1601-2697 pixels of magenta at
# any opacity over white in four reports (85-983 of the exact colour: a line between two pixel
# columns is drawn paler); its series and bars, 63761 pixels of C0; the two-rank run's rank-1
# lines and bar, 2601 pixels of C1.
MIN_PHASE_PIXELS = 500
MIN_SERIES_PIXELS = 5000
MIN_SECOND_RANK_PIXELS = 800
MIN_DRAWN_SHARE = 0.03  # a blank page is 0; the reports drew 0.096-0.115 of their pixels
# Phases of 500 steps: at 200 each lasted 1.5 s beside CPU hogs, under the 3 s warm-up, so no
# phase had a measured step and no gain was drawn (85 magenta pixels against ~570).
SCHEDULE = "500:num_workers=1,1000:num_workers=2"


def _demo_with_knob_changes(factory: pytest.TempPathFactory) -> Path:
    def make(folder: Path) -> dict[str, str]:
        result = gputop(
            "--headless", "--interval", "5", "--record", str(folder / "demo.jsonl"),
            "--schedule", SCHEDULE, str(REPO / "demos" / "resnet.py"), "--steps", "1500",
            timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        return {}

    return shared_runs.once(factory, ("report-demo", SCHEDULE), make)[1] / "demo.jsonl"


def _report(recording: Path, page: Path) -> Path:
    result = gputop("report", str(recording), "-o", str(page), timeout=REPORT_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    return page


def test_a_demo_run_with_knob_changes_draws_its_plots_and_marks_its_phases(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    page = _report(_demo_with_knob_changes(tmp_path_factory), tmp_path / "demo.html")
    text = page.read_text()
    assert "2: num_workers=1" in text and "3: num_workers=2" in text
    image = screenshot(page, tmp_path / "demo.png")
    assert drawn_share(image) > MIN_DRAWN_SHARE
    assert blended_pixels_of(image, PHASE_COLOUR) > MIN_PHASE_PIXELS
    assert pixels_of(image, FIRST) > MIN_SERIES_PIXELS


def test_a_two_rank_run_shows_each_rank(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    run = torchrun.unslowed_ddp(tmp_path_factory)
    page = _report(run.folder / "run.jsonl", tmp_path / "ranks.html")
    text = page.read_text()
    assert "Ranks (end of run)" in text and "rank 0" in text and "rank 1" in text
    image = screenshot(page, tmp_path / "ranks.png")
    assert drawn_share(image) > MIN_DRAWN_SHARE
    assert pixels_of(image, FIRST) > MIN_SERIES_PIXELS
    assert pixels_of(image, SECOND) > MIN_SECOND_RANK_PIXELS
