"""The job view reads a node's page through prometheus-client's parser, given only the lines
of the series it reads (jobview/exporters.py ``_read_lines``: ~80 of a node's ~270, a third of
the parse at 1,000 nodes): what it reads is what the whole page gives."""

from __future__ import annotations

import pytest

from benchmarks.scale.standin import Node, Rank, node_page
from gputop_train.jobview import exporters


def page() -> str:
    ranks = [Rank(r, r, 100 + r, 60.0 + r, 1.0 + r, 30.0 - r, steps_total=7.0) for r in range(8)]
    return node_page(Node("train-4711", "3", "gpu-node-3", ranks)).decode()


def test_the_lines_read_give_what_the_whole_page_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    read = exporters.parse_page(page(), "http://gpu-node-3:9455/metrics")
    monkeypatch.setattr(exporters, "_read_lines", lambda text: text)
    assert read == exporters.parse_page(page(), "http://gpu-node-3:9455/metrics")
    job, node, ranks = read
    assert (job, node.node, len(ranks), ranks[0].steps_total) == ("train-4711", "3", 8, 7.0)


def test_a_counter_keeps_its_type_line_and_other_families_are_left() -> None:
    kept = exporters._read_lines(page()).splitlines()
    assert "# TYPE gputop_train_steps_total counter" in kept
    assert not [line for line in kept if "step_part_ratio" in line or "gpu_power" in line]
    assert len(kept) < len(page().splitlines()) / 2
