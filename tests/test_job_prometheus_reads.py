"""The job view's reads of Prometheus (jobview/prometheus.py): a refresh reads again only the
nodes Prometheus scraped since the last, keeps the others' answers, and gives the sample a
read of every node gives (a 1,000-node refresh in under a second: docs/jobs.md "Scale")."""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.scale.standin import Node, Rank, StandinNodes
from gputop_train.jobview.figures import JobSample
from gputop_train.jobview.prometheus import PrometheusSource
from tests.support.prometheus_server import PROMETHEUS_MISSING, running_prometheus, static_job

JOB = "train-4711"


class FakePrometheus:
    """Answers the view's queries from a table: each host's last scrape time and its one
    rank's step time; says which hosts each rank query asked for (None: every host)."""

    def __init__(self, hosts: int) -> None:
        self.scraped = {f"gpu-node-{n}": 1.0 for n in range(hosts)}
        self.step_s = {host: 0.05 for host in self.scraped}
        self.asked: list[list[str] | None] = []

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        if promql.startswith("max by (host) (timestamp("):
            return [_row({"host": h}, t) for h, t in self.scraped.items()]
        matcher = re.search(r'host=~("(?:[^"\\]|\\.)*")', promql)
        hosts = [
            h
            for h in self.scraped
            if matcher is None or re.fullmatch(json.loads(matcher.group(1)), h)
        ]
        if "gputop_train_step_seconds{" not in promql:
            return []
        self.asked.append(None if matcher is None else hosts)
        return [
            _row({"host": h, "pid": str(100 + n), "rank": str(n)}, self.step_s[h])
            for n, h in enumerate(hosts)
        ]


def _row(labels: dict[str, str], value: float) -> dict[str, Any]:
    return {"metric": labels, "value": [0.0, repr(value)]}


def _steps(sample: JobSample) -> dict[str, float | None]:
    return {r.host: r.step_ms for r in sample.ranks}


def test_a_refresh_reads_again_only_the_nodes_scraped_since_the_last() -> None:
    fake = FakePrometheus(hosts=4)
    source = PrometheusSource("http://prometheus:9090", JOB)
    source.query = fake.query  # type: ignore[method-assign]
    try:
        first = source.sample()
        assert fake.asked == [None] and len(first.ranks) == 4  # the first read: every node
        fake.scraped["gpu-node-2"], fake.step_s["gpu-node-2"] = 2.0, 0.07
        second = source.sample()
        assert fake.asked[1:] == [["gpu-node-2"]]  # only the node scraped since
        assert _steps(second) == {
            "gpu-node-0": 50.0,
            "gpu-node-1": 50.0,
            "gpu-node-2": 70.0,
            "gpu-node-3": 50.0,
        }
        kept, before = {r.host: r for r in second.ranks}, {r.host: r for r in first.ranks}
        assert kept["gpu-node-0"] is before["gpu-node-0"]  # a kept node's rank: not built again
        source.sample()
        assert len(fake.asked) == 2  # nothing scraped since: no rank read
        del fake.scraped["gpu-node-1"]  # its scrape failed: its series are stale
        assert "gpu-node-1" not in _steps(source.sample())  # as a read of every node
        for host in fake.scraped:
            fake.scraped[host] = 3.0
        source.sample()
        assert fake.asked[-1] is None  # most nodes scraped since: every node, no list
    finally:
        source.close()


@pytest.mark.skipif(shutil.which("prometheus") is None, reason=PROMETHEUS_MISSING)
def test_from_a_real_prometheus_a_kept_read_is_a_read_of_every_node(tmp_path: Path) -> None:
    """Prometheus 2.42 scrapes four stand-in nodes every second; a rank's figure changes on
    one node: the source that keeps the other nodes' answers reads the change, and its sample
    is a fresh source's (a read of every node), but for the step counters that move on."""
    nodes = [
        Node(JOB, str(n), f"gpu-node-{n}", [Rank(2 * n + k, k, 1000 + 2 * n + k) for k in (0, 1)])
        for n in range(4)
    ]
    served = StandinNodes(nodes, refresh_s=0.5)

    def figures(sample: JobSample) -> list[Any]:
        return [replace(r, steps_total=None) for r in sample.ranks]

    try:
        targets = [(served.target(), f"/{n}/metrics") for n in range(4)]
        with running_prometheus(tmp_path, static_job("gputop-train", targets)) as url:
            kept = PrometheusSource(url, JOB)
            deadline = time.monotonic() + 30
            while len(kept.sample().ranks) < 8 and time.monotonic() < deadline:
                time.sleep(0.5)
            nodes[2].ranks[1].input_ms = 31.0  # rank 5, on node 2
            while time.monotonic() < deadline:
                fresh = PrometheusSource(url, JOB)
                every = fresh.sample()
                fresh.close()
                if any(r.rank == 5 and r.input_ms == 31.0 for r in every.ranks):
                    break
                time.sleep(0.5)
            read = kept.sample()
            kept.close()
    finally:
        served.close()
    assert [r.rank for r in read.ranks] == list(range(8))
    assert figures(read) == figures(every) and read.nodes == every.nodes
