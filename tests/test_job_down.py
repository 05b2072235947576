"""A node that stops answering keeps its row in the job view (issue 45): "not answering since
HH:MM:SS (why)" in the TUI, the headless lines and JSON, and the verdict says it judged
without it; read from the exporters (a failed read) and from a real Prometheus (its scrape
failed: ``up == 0``). And ``--window`` shorter than Prometheus's scrape interval is raised
to it, said in a line."""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest

from benchmarks.scale.standin import Node, Rank, StandinNodes, node_page
from gputop_train.cli.job import run_job
from gputop_train.jobview import exporters
from gputop_train.jobview.exporters import ExporterSource, parse_page
from gputop_train.jobview.figures import JobSample, NodeFigures
from gputop_train.jobview.judge import JobHistory
from gputop_train.jobview.prometheus import PrometheusSource
from gputop_train.jobview.tui import _node_cells
from gputop_train.jobview.view import headline_line, node_lines, to_json
from tests.support.prometheus_server import PROMETHEUS_MISSING, running_prometheus, static_job

WINDOW_S = 10.0
SINCE = time.mktime((2026, 12, 6, 3, 20, 11, 0, 0, -1))  # 03:20:11 on the viewer's clock


def job(slow: dict[int, str], nodes: int) -> list[Node]:
    """``nodes`` nodes of 2 ranks, 60 ms steps; the rank in ``slow`` 30 ms more in its input,
    the others waiting for it in their all-reduce."""
    return [
        Node("train-4711", str(n), f"gpu-node-{n}", [
            Rank(r, r % 2, 1000 + r, 60.0, 31.0 if r in slow else 1.0, 1.0 if r in slow else 31.0)
            for r in (2 * n, 2 * n + 1)
        ])
        for n in range(nodes)
    ]  # fmt: skip


def test_a_node_not_answering_keeps_its_row_and_the_verdict_says_it_judged_without_it() -> None:
    """Node 2 stopped answering; rank 3 on node 1 is slowed: named, with "judged without
    node 2" beside it; node 2's row says since when and why, in every front end."""
    nodes = job({3: "input"}, nodes=3)
    history = JobHistory(WINDOW_S)
    for k in range(4):
        for node in nodes:
            for rank in node.ranks:
                rank.steps_total += WINDOW_S * 1000.0 / rank.step_ms
        read = [parse_page(node_page(n).decode(), n.host) for n in nodes[:2]]
        down = NodeFigures("2", "gpu-node-2", "x", down_reason="timed out", down_since=SINCE)
        history.add(
            JobSample(
                "train-4711",
                k * WINDOW_S,
                (*(node for _, node, _ in read), down),
                tuple(rank for _, _, ranks in read for rank in ranks),
            )
        )
    view = history.view("test")
    assert view.headline is not None and (view.headline.rank, view.headline.node) == (3, "1")
    assert headline_line(view).endswith("| judged without node 2")
    assert [n.node for n in view.nodes] == ["1", "2", "0"]  # the named, then the silent
    row = view.nodes[1]
    assert row.state == "not answering since 03:20:11 (timed out)"
    assert node_lines(view)[1].endswith("| not answering since 03:20:11 (timed out)")
    assert _node_cells(row)[-1] == "not answering since 03:20:11 (timed out)"  # the TUI's
    out = to_json(view)
    assert out["judged_without"] == ["2"]
    assert (out["nodes"][1]["down_since"], out["nodes"][1]["down_reason"]) == (SINCE, "timed out")
    silent = [f for f in out["findings"] if f["kind"] == "unreachable"]
    assert [(f["node"], f["text"]) for f in silent] == [
        ("2", "node 2 (gpu-node-2): not answering since 03:20:11 (timed out); "
         "the verdict judged without it")
    ]  # fmt: skip


def test_an_exporter_that_stops_answering_is_a_row_since_its_last_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Node 1's exporter answers, then goes (connection refused); a third never answers (it
    accepts and says nothing: timed out). Each is a row, as last read, since its last answer
    (the one never read: its address, since the first try)."""
    monkeypatch.setattr(exporters, "SCRAPE_TIMEOUT_S", 0.3)
    first, second = job({}, nodes=2)
    alive, going = StandinNodes([first]), StandinNodes([second])
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(8)  # a connection is taken, never answered
    urls = [alive.url("0"), going.url("1"), f"http://127.0.0.1:{mute.getsockname()[1]}/metrics"]
    source = ExporterSource(urls)
    try:
        before = source.sample()
        going.close()
        after = source.sample()
    finally:
        alive.close()
        mute.close()
        source.close()
    nodes = {n.node: n for n in after.nodes}
    assert [n.node for n in before.nodes if n.down_reason is None] == ["0", "1"]
    assert nodes["0"].down_reason is None
    assert nodes["1"].host == "gpu-node-1" and nodes["1"].down_since == before.at
    assert "refused" in (nodes["1"].down_reason or "")
    mute_name = urls[2].split("/")[2]
    assert nodes[mute_name].down_reason == "timed out"
    assert nodes[mute_name].down_since == before.at  # its first failed read
    assert [r.node for r in after.ranks] == ["0", "0"] and after.problems == ()


@pytest.mark.skipif(shutil.which("prometheus") is None, reason=PROMETHEUS_MISSING)
def test_from_a_real_prometheus_a_node_whose_scrape_fails_is_not_answering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prometheus 2.42 scrapes three stand-in nodes every 2 s; node 2's exporter goes: its
    row says "not answering since" its last scrape, with Prometheus's scrape error; and a
    --window of 1 s is raised to the 2 s scrape interval, said in a line."""
    nodes = job({}, nodes=3)
    alive, going = StandinNodes(nodes[:2], refresh_s=0.5), StandinNodes(nodes[2:], refresh_s=0.5)
    targets = [(alive.target(), "/0/metrics"), (alive.target(), "/1/metrics")]
    targets.append((going.target(), "/2/metrics"))
    try:
        with running_prometheus(tmp_path, static_job("gputop-train", targets, 2.0)) as url:
            source = PrometheusSource(url, "train-4711")
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and (
                len(source.sample().ranks) < 6 or source.scrape_interval_s() is None
            ):
                time.sleep(0.5)
            interval = source.scrape_interval_s()
            gone_at = time.time()
            going.close()
            down: NodeFigures | None = None
            while time.monotonic() < deadline and down is None:
                time.sleep(0.5)
                down = next((n for n in source.sample().nodes if n.down_reason), None)
            source.close()
            code = run_job(["--prometheus", url, "--job", "train-4711", "--window", "1",
                            "--format", "json", "--count", "1"])  # fmt: skip
    finally:
        alive.close()
    assert interval == 2.0
    assert down is not None and down.node == "2"
    assert down.down_reason in ("connection refused", "connection reset by peer")  # last words
    assert down.down_since is not None and gone_at - 3.0 < down.down_since <= gone_at
    assert code == 0
    told = capsys.readouterr()
    assert "--window 1 s is shorter than Prometheus's scrape interval (2 s): windows of 2 s" in (
        told.err
    )
    assert '"judged_without": ["2"]' in told.out
