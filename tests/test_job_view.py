"""``gputop-train job`` (issue 45): the whole job from the nodes' exporters, judged with the
straggler verdict: the slow rank and its node, a slow node as a node, nothing when none is
slowed; headless lines, JSON, the recording's report; the TUI at 80x24 with 8 nodes."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import statistics
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.scale.standin import Node, Rank, StandinNodes, node_page
from gputop_train.advise.rank_verdict import MIN_STEPS
from gputop_train.cli.job import run_job
from gputop_train.export import prometheus
from gputop_train.jobview.exporters import ExporterSource, parse_page, parse_urls
from gputop_train.jobview.figures import JobSample, RankFigures, SourceError
from gputop_train.jobview.judge import JobHistory, _OthersMedians
from gputop_train.jobview.prometheus import PrometheusSource
from gputop_train.jobview.view import headline_line, node_lines, to_json
from gputop_train.views import view_of
from tests.support.metrics import TRAIN, exposition
from tests.support.prometheus_server import PROMETHEUS_MISSING, running_prometheus, static_job
from tests.support.sessions import two_rank_session

WINDOW_S = 10.0


def job(slow: dict[int, str], nodes: int = 2, per_node: int = 2) -> list[Node]:
    """A job of ``nodes`` x ``per_node`` gloo-like ranks: each waits ~30 ms a step in its
    all-reduce for the slowest; ``slow``: rank -> "input" or "compute" (+30 ms there)."""
    built = []
    for n in range(nodes):
        ranks = []
        for local in range(per_node):
            rank = n * per_node + local
            cause = slow.get(rank)
            ranks.append(
                Rank(
                    rank,
                    local,
                    1000 + rank,
                    step_ms=60.0,
                    input_ms=31.0 if cause == "input" else 1.0,
                    comm_ms=1.0 if cause else (31.0 if slow else 2.0),
                )
            )
        built.append(Node("train-4711", str(n), f"gpu-node-{n}", ranks))
    return built


def judged(nodes: list[Node], windows: int = 4) -> JobHistory:
    """The job's pages read every window, as the job view reads them."""
    history = JobHistory(WINDOW_S)
    for k in range(windows):
        for node in nodes:
            for rank in node.ranks:
                rank.steps_total += WINDOW_S * 1000.0 / rank.step_ms
        read = [parse_page(node_page(n).decode(), n.host) for n in nodes]
        history.add(
            JobSample(
                "train-4711",
                k * WINDOW_S,
                tuple(node for _, node, _ in read),
                tuple(rank for _, _, ranks in read for rank in ranks),
            )
        )
    return history


def test_a_slowed_rank_is_named_with_its_node_its_host_and_where_to_attach() -> None:
    view = judged(job({3: "input"})).view("test")
    found = view.headline
    assert found is not None and found.kind == "straggler"
    assert (found.rank, found.node, found.host, found.cause) == (3, "1", "gpu-node-1", "input")
    assert found.ssh == "ssh -t gpu-node-1 gputop-train attach 1003"
    assert view.nodes[0].node == "1" and view.nodes[0].worst_rank == 3  # the worst node first
    assert "rank 3 on node 1 (gpu-node-1) waits on its input" in headline_line(view)


def test_a_slow_node_is_named_as_a_node_not_as_its_ranks() -> None:
    view = judged(job({2: "compute", 3: "compute"})).view("test")
    found = view.headline
    assert found is not None and found.kind == "slow_node"
    assert (found.node, found.host, found.ranks) == ("1", "gpu-node-1", (2, 3))
    assert found.text.startswith("slow node: node 1 (gpu-node-1)")


def test_nothing_is_named_when_no_rank_is_slowed() -> None:
    view = judged(job({})).view("test")
    assert view.findings == () and view.windows == 3
    assert "no straggler" in headline_line(view)


def test_no_verdict_before_three_windows_are_held() -> None:
    view = judged(job({3: "input"}), windows=3).view("test")  # 2 windows between 3 reads
    assert view.headline is None and "verdict after 3 windows: 2" in headline_line(view)


def test_json_gives_nodes_ranks_with_their_node_and_findings_with_rank_and_node() -> None:
    out = to_json(judged(job({1: "input"})).view("test"))
    assert [n["node"] for n in out["nodes"]][:1] == ["0"]
    assert {(r["rank"], r["node"], r["host"]) for r in out["ranks"]} == {
        (0, "0", "gpu-node-0"),
        (1, "0", "gpu-node-0"),
        (2, "1", "gpu-node-1"),
        (3, "1", "gpu-node-1"),
    }
    straggler = out["findings"][0]
    assert (straggler["kind"], straggler["rank"], straggler["node"]) == ("straggler", 1, "0")
    json.dumps(out)  # all of it serialisable


def test_the_standin_serves_what_a_real_exporter_serves() -> None:
    """The stand-in's families and label names are the real exporter's (scale benchmarks and
    these tests read it as the job view reads a node)."""

    def shape(text: str) -> dict[str, frozenset[str]]:
        found: dict[str, frozenset[str]] = {}
        for line in text.splitlines():
            if match := re.fullmatch(r"(gputop_train_\w+)\{(.*)\} \S+", line):
                found[match.group(1)] = frozenset(re.findall(r'(\w+)="', match.group(2)))
        return found

    from gputop_train import events

    session = two_rank_session()
    session.apply(events.GpusFound(("H100", "H100"), uuids=("GPU-aaa", "GPU-bbb")))
    real = shape(exposition(session))
    real.pop("gputop_train_finding")  # the node's own advisor's: the job view does not read it
    standin = shape(node_page(job({})[0]).decode())
    assert {k: v for k, v in standin.items() if k in real} == real
    declared = set(re.findall(r"# TYPE (gputop_train_\w+) (\w+)", exposition(session)))
    names = {n + "_total" if kind == "counter" and "_total" not in n else n for n, kind in declared}
    assert set(standin) <= names  # every family the stand-in serves, the exporter declares


def test_a_real_exporters_page_is_read_with_its_node_and_ranks() -> None:
    exporter = prometheus.serve(
        "127.0.0.1:0", lambda: view_of(two_rank_session().snapshot(30.0)), TRAIN
    )
    try:
        sample = ExporterSource([exporter.url]).sample()
    finally:
        exporter.close()
    assert sample.job == "train"
    assert [(r.rank, r.node, r.pid) for r in sample.ranks] == [
        (0, TRAIN.node, 11),
        (1, TRAIN.node, 12),
    ]
    waits = {r.rank: r.data_wait_pct for r in sample.ranks}
    assert waits[1] == pytest.approx(60.0) and waits[0] == pytest.approx(2.0)


def test_an_exporter_that_does_not_answer_is_said_and_the_rest_shown() -> None:
    nodes = StandinNodes(job({}))
    try:
        dead = "127.0.0.1:9/metrics"  # the discard port: nothing listens
        sample = ExporterSource([nodes.url("0"), nodes.url("1"), f"http://{dead}"]).sample()
        with pytest.raises(SourceError, match="no exporter answered"):
            ExporterSource([f"http://{dead}"]).sample()
    finally:
        nodes.close()
    assert [(n.node, n.down_reason is None) for n in sample.nodes] == [
        ("0", True), ("1", True), ("127.0.0.1:9", False)
    ]  # fmt: skip
    assert "refused" in str(sample.nodes[2].down_reason)  # its row: tests/test_job_down.py


def test_urls_take_host_port_and_get_the_metrics_path() -> None:
    assert parse_urls("n1:9455, http://n2:9455/metrics") == [
        "http://n1:9455/metrics",
        "http://n2:9455/metrics",
    ]
    with pytest.raises(SourceError, match="--from"):
        parse_urls(" , ")


def test_headless_json_lines_and_the_report_of_their_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = StandinNodes(job({}))
    record = tmp_path / "job.jsonl"
    try:
        urls = f"{nodes.url('0')},{nodes.url('1')}"
        code = run_job(["--from", urls, "--format", "json", "--count", "2", "--interval",
                        "0.05", "--record", str(record)])  # fmt: skip
    finally:
        nodes.close()
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(json.loads(line)["job"] == "train-4711" for line in lines)
    assert len(json.loads(lines[-1])["ranks"]) == 4
    assert run_job(["report", str(record)]) == 0
    told = capsys.readouterr().out
    assert "job train-4711" in told and "2 views" in told and "named: nothing" in told


def test_headless_text_gives_a_line_per_node_on_demand() -> None:
    view = judged(job({3: "input"})).view("test")
    lines = node_lines(view)
    assert len(lines) == 2 and lines[0].startswith("  node 1 (gpu-node-1): ranks 2-3")
    assert "worst rank 3 (input" in lines[0]


def test_with_nodes_missing_from_readings_the_slowed_rank_is_named_and_no_other() -> None:
    """Nodes whose scrape failed are missing from a reading (38-66 of 1,000 a reading in the
    first 1,000-node runs: docs/jobs.md "Scale"): whichever others are missing, the slowed
    rank is named with its node, and no other rank ever; a reading without its node names
    nothing while a window that ends at it is among the last three (a rank is named only when
    read at the end of each; where a window starts at it, its ranks' steps are counted from
    the reading before)."""
    nodes = job({13: "input"}, nodes=12, per_node=2)  # rank 13 is node 6's
    history, lost, named = JobHistory(WINDOW_S), random.Random(45), []
    for k in range(12):
        for node in nodes:
            for rank in node.ranks:
                rank.steps_total += WINDOW_S * 1000.0 / rank.step_ms
        missing = set(lost.sample(range(12), 3)) - {6} | ({6} if k == 6 else set())
        read = [
            parse_page(node_page(n).decode(), n.host) for n in nodes if int(n.node) not in missing
        ]
        history.add(
            JobSample(
                "train-4711",
                k * WINDOW_S,
                tuple(node for _, node, _ in read),
                tuple(rank for _, _, ranks in read for rank in ranks),
            )
        )
        found = history.view("test").headline
        named.append(None if found is None else (found.kind, found.rank, found.node))
    straggler = ("straggler", 13, "6")
    assert named == [None] * 3 + [straggler] * 3 + [None] * 3 + [straggler] * 3


def test_read_as_prometheus_holds_it_every_window_holds_a_scrape_of_every_node() -> None:
    """From Prometheus a node's step counter moves only at its scrape (every 15 s, each node
    at its own offset) while the view reads every 2.5 s: each window holds a scrape of every
    node, so every rank is judged in every window and the slowed rank is named at each read
    (the samples nearest a window apart held the same scrape for some nodes: 2,256 of 8,000
    ranks unjudged in one window of the 2026-12-06 run, docs/jobs.md "Scale")."""
    scrape_s, nodes = 15.0, job({13: "input"}, nodes=12, per_node=2)
    history = JobHistory(scrape_s)

    def read(at: float) -> JobSample:
        for n, node in enumerate(nodes):
            offset = n * 1.25
            scraped = math.floor((at - offset) / scrape_s) * scrape_s + offset
            for rank in node.ranks:
                rank.steps_total = scraped * 1000.0 / rank.step_ms
        pages = [parse_page(node_page(n).decode(), n.host) for n in nodes]
        return JobSample(
            "train-4711",
            at,
            tuple(node for _, node, _ in pages),
            tuple(rank for _, _, ranks in pages for rank in ranks),
        )

    for k in (3, 2, 1):  # the backfill: the windows before now, read at once
        history.add(read(100.0 - k * scrape_s))
    judged, named = [], []
    for i in range(12):
        history.add(read(100.0 + 2.5 * i))
        judged.append(min(sum(r.steps >= MIN_STEPS for r in w) for w in history.windows()))
        found = history.view("test").headline
        named.append(None if found is None else (found.kind, found.rank, found.node))
    assert judged == [24] * 12
    assert named == [("straggler", 13, "6")] * 12


def test_read_as_a_loaded_prometheus_holds_it_every_rank_is_judged() -> None:
    """Scrapes land 0-4 s after they start (a loaded Prometheus: up to 8.3 s a scrape in the
    1,000-node run of 2026-12-06 03:27): a window's two samples, a scrape interval apart, can
    hold the same scrape of a node; its ranks' steps are then counted from an older sample, up
    to two windows back, so every rank is judged in every window (it failed before: ranks of
    late nodes unjudged; a node missing from a start: ``…nodes_missing_from_readings…``)."""
    scrape_s, nodes, rng = 15.0, job({13: "input"}, nodes=12, per_node=2), random.Random(45)
    late = {(n, k): rng.uniform(0.0, 4.0) for n in range(12) for k in range(12)}
    history = JobHistory(scrape_s)

    def read(at: float) -> JobSample:
        held = []
        for n, node in enumerate(nodes):
            k = math.floor((at - n * 1.25) / scrape_s)
            k -= at < k * scrape_s + n * 1.25 + late[(n, k)]  # the last scrape not landed yet
            for rank in node.ranks:
                rank.steps_total = (k * scrape_s + n * 1.25) * 1000.0 / rank.step_ms
            held.append(parse_page(node_page(node).decode(), node.host))
        return JobSample(
            "train-4711",
            at,
            tuple(node for _, node, _ in held),
            tuple(rank for _, _, ranks in held for rank in ranks),
        )

    for k in (4, 3, 2, 1):  # the backfill (PrometheusSource.past)
        history.add(read(100.0 - k * scrape_s))
    unjudged = []
    for i in range(16):
        history.add(read(100.0 + 2.5 * i))
        unjudged += [r.rank for w in history.windows() for r in w if r.steps < MIN_STEPS]
    assert unjudged == []


def test_a_rank_that_is_gone_is_left_out_of_the_verdict() -> None:
    history = judged(job({}))
    last = history._samples[-1]
    gone = RankFigures(rank=9, node="1", host="gpu-node-1", pid=9, connected=False)
    history.add(JobSample(last.job, last.at + 1, last.nodes, (*last.ranks, gone)))
    assert history.windows()[-1] and all(w.rank != 9 for w in history.windows()[-1])


async def test_the_tui_fits_80x24_with_8_nodes_and_scrolls_past(tmp_path: Path) -> None:
    from gputop_train.jobview.rows_table import RowsTable
    from gputop_train.jobview.tui import JobApp
    from gputop_train.jobview.watch import JobWatch

    nodes = StandinNodes(job({13: "input"}, nodes=24, per_node=2))
    try:
        urls = [nodes.url(str(n)) for n in range(24)]
        history = judged(job({13: "input"}, nodes=24, per_node=2))
        app = JobApp(JobWatch(ExporterSource(urls), history), interval=60.0)
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(50):
                await pilot.pause(0.1)
                if app.view is not None:
                    break
            table = app.query_one("#nodes", RowsTable)
            assert table.row_count == 24
            assert table.region.height >= 8 + 1  # 8 nodes and the header in view
            assert app.screen.region.width == 80
            assert str(table.get_row_at(0)[0]) == "6"  # rank 13's node first
            assert app.focused is table
            await pilot.press(*["down"] * 23)
            await pilot.pause()
            assert table.cursor_row == 23  # scrolls past the screen, keyboard only
            assert table.scroll_y > 0
            await pilot.press("r")
            ranks = app.query_one("#ranks", RowsTable)
            assert ranks.display and ranks.row_count == 48
    finally:
        nodes.close()


@pytest.mark.skipif(shutil.which("prometheus") is None, reason=PROMETHEUS_MISSING)
def test_from_a_real_prometheus_the_slow_rank_and_its_node_are_named(tmp_path: Path) -> None:
    """Prometheus 2.42 scrapes two stand-in nodes every second (rank 3 on node 1 slowed in
    its input); the job view reads them back over PromQL, with windows of 2 s."""
    nodes = StandinNodes(job({3: "input"}))
    try:
        targets = [(nodes.target(), f"/{n}/metrics") for n in ("0", "1")]
        with running_prometheus(tmp_path, static_job("gputop-train", targets)) as url:
            source = PrometheusSource(url, "train-4711")
            history, view = JobHistory(2.0), None
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                history.add(source.sample())
                view = history.view(source.describe())
                if view.headline is not None:
                    break
                time.sleep(0.5)
            running = PrometheusSource(url).job  # the one job running, found by itself
    finally:
        nodes.close()
    assert view is not None and view.headline is not None, view
    found = view.headline
    assert (found.kind, found.rank, found.node, found.host) == ("straggler", 3, "1", "gpu-node-1")
    assert [n.node for n in view.nodes] == ["1", "0"] and running == "train-4711"
    assert {(r.rank, r.node) for r in view.ranks} == {(0, "0"), (1, "0"), (2, "1"), (3, "1")}


def test_a_slow_verdict_does_not_hold_the_refresh_and_its_age_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A verdict slower than the budget (a loaded box, a job past 1,000 nodes: docs/jobs.md
    "Scale"): the rows come within the budget, with the last verdict that finished and its
    age."""
    from gputop_train.jobview import judge as judging

    history = judged(job({3: "input"}))
    first = history.view("test")  # judged at once: a small job's verdict is fresh
    assert first.headline is not None and first.verdict_age_s == 0.0
    gate = threading.Event()
    real = judging.judge
    monkeypatch.setattr(judging, "judge", lambda windows: (gate.wait(10), real(windows))[1])
    started = time.monotonic()
    second = history.view("test")
    assert time.monotonic() - started < judging.VERDICT_BUDGET_S + 0.5
    assert second.headline is not None and second.headline.rank == 3  # the last verdict
    time.sleep(1.0)
    third = history.view("test")
    assert third.verdict_age_s >= 1.0 and "verdict of" in headline_line(third)
    gate.set()


@given(st.lists(st.one_of(st.none(), st.floats(0, 100)), min_size=1, max_size=9))
def test_each_ranks_others_median_is_the_plain_median_of_the_others(
    inputs: list[float | None],
) -> None:
    """The rows' lag reads each rank's others' median off one sorted list (judge.py): it is
    the median of the others' figures, the rank itself left out (a rank not among them: of
    all)."""
    ranks = [
        RankFigures(rank=i, node="0", host="h", pid=i, input_ms=v) for i, v in enumerate(inputs)
    ]
    others = _OthersMedians(ranks)
    for rank in [*ranks, RankFigures(rank=99, node="0", host="x", pid=99, input_ms=1.0)]:
        values = [r.input_ms for r in ranks if r.input_ms is not None and r is not rank]
        own = rank.input_ms is not None and rank in ranks
        expected = statistics.median(values) if values else None
        if not own:  # not measured or not among them: the median of all
            all_values = [r.input_ms for r in ranks if r.input_ms is not None]
            expected = statistics.median(all_values) if all_values else None
        assert others.of(rank, "input_ms") == expected
