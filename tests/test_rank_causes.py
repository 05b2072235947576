"""Issue 37, the ranks' side: each straggler named with its cause (a loader-less input, a
shared GPU), held over the window, headlined before the job-level input finding it explains;
the stall finding's ranks in Prometheus; the rules under promtool.

Synthetic ranks here; the gloo torchrun runs are in tests/test_rank_runs.py.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from gputop_train import events
from gputop_train.advise import rules, stragglers
from gputop_train.advise.rules import registry
from gputop_train.export.prometheus import parse_address
from gputop_train.samples import GpuProcess, GpuSample
from gputop_train.session.breakdown import StepParts
from gputop_train.session.clocks import gpu_clocks
from gputop_train.session.comm import CommStats
from gputop_train.session.job_gpus import gpu_figures, select
from gputop_train.session.stats import RankIdentity, RankStats, StepStats
from tests.support.metrics import exposition, samples
from tests.support.observations import observe
from tests.support.ranks import held_steps
from tests.support.sessions import two_rank_session

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def rank(
    index: int,
    waits: list[float],
    step_ms: float = 55.0,
    input_ms: float = 1.0,
    clock: str = "host",
    gpu: int | None = None,
    data_wait_pct: float | None = 0.0,
) -> RankStats:
    """A rank whose steps wait ``waits`` in collectives (one per step, step 1 first) and spend
    ``input_ms`` before their forward (the step's data part, on ``clock``)."""
    comm = CommStats(
        len(waits),
        statistics.median(waits),
        statistics.fmean(waits),
        100 * statistics.fmean(waits) / step_ms,
    )
    rest = step_ms - input_ms
    parts = StepParts(
        clock=clock,
        data_source="host gap",
        steps=len(waits),
        pct={"data": 100 * input_ms / step_ms, "forward": 100 * rest / step_ms}
        | dict.fromkeys(("backward", "optimizer", "rest")),
        ms={"data": input_ms, "forward": rest} | dict.fromkeys(("backward", "optimizer", "rest")),
        step_ms=step_ms,
    )
    n = len(waits)
    figures = StepStats(
        n, 1000 / step_ms, 8000 / step_ms, step_ms, step_ms, data_wait_pct, None, parts=parts
    )
    who = RankIdentity(100 + index, index, index, "node")
    gpus = (gpu,) if gpu is not None else ()
    return RankStats(who, figures, n, n * 8, gpus, comm, held_steps(waits, step_ms, input_ms))


def straggler(*ranks: RankStats, **changes: object) -> rules.Finding | None:
    return rules.straggler(observe(ranks=ranks, **changes))


def node(ticks: Sequence[tuple[GpuSample, ...]]) -> dict[str, object]:
    """Two GPUs' NVML ticks as the observation holds them: clocks, and each GPU's figures
    with the job's ranks (PIDs 100 and 101, one a GPU) apart from everyone else's."""
    job = select([None, None], {100: [0], 101: [1]}, [100, 101], {}, None)
    return {"gpu_clocks": gpu_clocks(ticks), "gpus": gpu_figures(ticks, job)}


# -- causes -------------------------------------------------------------------------------


def test_a_rank_slowed_in_a_loader_less_get_batch_is_named_for_its_input() -> None:
    # The dev box's gloo run (2026-11-27): rank 1 spends 30.9 ms a step in get_batch before
    # its forward, its data-wait 0 (no DataLoader); rank 0 waits 32.6 ms in the all-reduce.
    found = straggler(rank(0, [32.6] * 30, input_ms=0.6), rank(1, [1.3] * 30, input_ms=30.9))
    assert found is not None and found.rank == 1
    assert found.title == "Straggler: rank 1 waits for data, and the other ranks wait for rank 1"
    assert "the other ranks wait 31.3 ms a step for it" in found.evidence[0]
    assert "its input takes 30.9 ms a step, the other ranks' 0.6 ms" in found.evidence[0]


def test_a_rank_slowed_in_its_gpu_compute_is_named_for_its_compute_not_its_input() -> None:
    # On the GPU's clock the slowed rank's GPU is never idle before its forward: its input
    # reads as small as the others'.
    found = straggler(
        rank(0, [31.0] * 30, input_ms=0.4, clock="gpu"),
        rank(1, [1.2] * 30, input_ms=0.5, clock="gpu"),
    )
    assert found is not None
    assert found.title.startswith("Straggler: rank 1 computes slower")


def test_a_rank_whose_gpu_another_process_shares_is_named_for_it() -> None:
    ticks = [
        (
            GpuSample(0, t, sm_clock_mhz=1980.0, processes=(GpuProcess(100, 1 << 30, 60.0),)),
            GpuSample(
                1,
                t,
                sm_clock_mhz=1980.0,
                processes=(GpuProcess(101, 1 << 30, 45.0), GpuProcess(4242, 2 << 30, 40.0)),
            ),
        )
        for t in range(10)
    ]
    found = straggler(
        rank(0, [25.0] * 30, step_ms=60.0, gpu=0),
        rank(1, [2.0] * 30, step_ms=60.0, gpu=1),
        **node(ticks),
    )
    assert found is not None
    assert found.title.startswith("Straggler: rank 1 shares its GPU with another process")
    assert "PID 4242 (40% SM)" in found.evidence[1]


def test_a_process_on_every_ranks_gpu_is_not_what_sets_one_rank_apart() -> None:
    ticks = [
        tuple(
            GpuSample(i, t, sm_clock_mhz=1980.0, processes=(GpuProcess(900 + i, 1 << 30, 40.0),))
            for i in (0, 1)
        )
        for t in range(10)
    ]
    found = straggler(
        rank(0, [25.0] * 30, step_ms=60.0, gpu=0),
        rank(1, [2.0] * 30, step_ms=60.0, gpu=1),
        **node(ticks),
    )
    assert found is not None and found.title.startswith("Straggler: rank 1 computes slower")


# -- held over the window -----------------------------------------------------------------


def test_a_gap_in_one_part_of_the_window_names_no_rank() -> None:
    # Unslowed ranks under a burst of host load: for a third of the window rank 1 waits far
    # less than rank 0 (its median too, so the window's median alone would name it), else
    # they wait alike.
    burst = [3.0] * 10 + [3.0] * 10 + [30.0] * 10
    calm = [3.0] * 10 + [3.0] * 10 + [1.0] * 10
    assert stragglers.verdict_of(observe(ranks=(rank(0, burst), rank(1, calm)))) is None
    found = straggler(rank(0, [30.0] * 30), rank(1, [1.0] * 30))
    assert found is not None and found.rank == 1  # held in every part: named


def test_the_gap_must_be_the_same_ranks_in_every_part() -> None:
    # Rank 0 lags for two thirds, rank 1 for the last: flickering from rank to rank.
    waits0 = [2.0] * 20 + [30.0] * 10
    waits1 = [30.0] * 20 + [2.0] * 10
    assert stragglers.verdict_of(observe(ranks=(rank(0, waits0), rank(1, waits1)))) is None


# -- the headline -------------------------------------------------------------------------


def test_rank_zeros_input_straggling_is_headlined_before_the_job_level_input_finding() -> None:
    # Rank 0 (whose figures are the job's) waits 45% of its step for data, rank 1 1%: the job
    # reads input-bound, with its workers busy and its GPU half idle, but only because rank 0
    # straggles. The input finding scores higher on its own.
    o = observe(
        ranks=(
            rank(0, [1.0] * 30, data_wait_pct=45.0, input_ms=25.0),
            rank(1, [25.0] * 30, data_wait_pct=1.0),
        ),
        step_data_wait_pct=45.0,
        gpu_util_pct=50.0,
        gpu_sm_active_pct=45.0,
        worker_cpu_pct=390.0,
    )
    fired = [f for f in (rule(o) for rule in registry.RULES) if f is not None]
    assert max(fired, key=lambda f: f.score).id.startswith("input.")
    found = rules.findings(o)
    assert found[0].id == "ranks.straggler" and found[0].rank == 0
    assert found[1].id.startswith("input.")


# -- Prometheus ---------------------------------------------------------------------------


def stall_reading(*ranks: tuple[int, str | None]) -> dict[str, object]:
    return {
        "at": 1000.0,
        "stalled_s": 130.0,
        "folder": "/tmp/x-stall-1",
        "ranks": [
            {"rank": r, "pid": 10 + r, "step": 40, "answered": True, "collective": where}
            for r, where in ranks
        ],
    }


@pytest.mark.parametrize(
    ("ranks", "named"),
    [
        (((0, "all_reduce"), (1, None)), {"1"}),  # rank 1 did not arrive
        (((0, "all_reduce"), (1, "all_reduce")), {"0", "1"}),  # every rank waits: all stalled
        (((0, None), (1, None)), {"0", "1"}),  # none in a collective: all stalled
    ],
)
def test_the_stall_finding_is_served_for_each_rank_it_names_never_an_empty_rank(
    ranks: tuple[tuple[int, str | None], ...], named: set[str]
) -> None:
    session = two_rank_session()
    session.apply(events.ReadingTaken("stall", stall_reading(*ranks)))
    found = samples(exposition(session), "gputop_train_finding")
    stalled = {dict(k)["rank"] for k in found if dict(k)["finding"] == "ranks.stalled"}
    assert stalled == named


def test_each_rank_serves_its_input_wait() -> None:
    text = exposition(two_rank_session())  # rank 1 waits 30 ms of its 50 ms step for data
    inputs = samples(text, "gputop_train_input_wait_seconds")
    assert {dict(k)["rank"]: v for k, v in inputs.items()} == {
        "0": pytest.approx(0.001),
        "1": pytest.approx(0.030),
    }


def test_the_alert_rules_hold_their_promtool_cases() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool: apt-get install prometheus (as .ci/run does)")
    result = subprocess.run(
        [promtool, "test", "rules", "rules_test.yml"],
        cwd=DOCS / "prometheus",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_first_example_serves_a_scrape_from_another_host() -> None:
    text = (DOCS / "prometheus.md").read_text()
    first = text.split("```bash\n", 1)[1].split("```", 1)[0]
    command = next(line for line in first.splitlines() if line.startswith("gputop-train"))
    address = command.split("--prometheus ", 1)[1].split()[0]
    host, _ = parse_address(address)
    assert ipaddress.ip_address(host).is_unspecified  # every interface, not 127.0.0.1


@pytest.mark.parametrize(("status", "state"), [(0, "finished"), (3, "crashed")])
def test_an_ended_job_is_served_until_its_scraper_has_read_its_exit_status(
    tmp_path: Path, status: int, state: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"import sys, time; time.sleep(3); sys.exit({status})\n")
    monitor = subprocess.Popen(
        [sys.executable, "-m", "gputop_train", "--headless", "--no-record", "--prometheus",
         "127.0.0.1:0", str(script)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert monitor.stderr is not None
        url = ""
        for line in monitor.stderr:
            if found := re.search(r"Prometheus metrics at (\S+)", line):
                url = found.group(1)
                break
        assert url, "the monitor never said where its metrics are"
        body = ""  # a scraper that reads the page every 0.3 s until the monitor leaves
        with contextlib.suppress(OSError):
            while monitor.poll() is None:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read().decode()
                time.sleep(0.3)
        assert monitor.wait(timeout=30) == status  # it left once its scraper read the end
    finally:
        if monitor.poll() is None:
            monitor.kill()
    assert re.search(rf"gputop_train_job_exit_code\{{.*\}} {status}\.0", body), state
    assert re.search(r"gputop_train_job_running\{.*\} 0\.0", body)


# -- the TUI ------------------------------------------------------------------------------


def test_a_wide_steps_panel_shows_each_ranks_step_split_and_a_narrow_one_keeps_its_rows() -> None:
    from dataclasses import replace

    from gputop_train.tui.panels.text import RANK_SPLIT_WIDTH, steps_panel
    from gputop_train.views import view_of

    snap = two_rank_session().snapshot(window_s=30.0)
    ranks = (rank(0, [30.0] * 30, input_ms=1.0), rank(1, [2.0] * 30, input_ms=1.0))
    view = view_of(replace(snap, ranks=ranks))
    wide = steps_panel(view, width=RANK_SPLIT_WIDTH).plain.splitlines()
    header = next(line for line in wide if line.lstrip().startswith("rank"))
    assert header.split()[-5:] == ["data", "fwd", "bwd", "opt", "ms"]
    row = next(line for line in wide if line.lstrip().startswith("1 "))
    assert row.split()[-4:] == ["1.0", "54.0", "N/A", "N/A"]  # data, forward; no bwd/opt
    narrow = steps_panel(view, width=40).plain
    assert "fwd" not in narrow and all(len(line) <= 40 for line in narrow.splitlines())
