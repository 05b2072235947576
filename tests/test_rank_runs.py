"""Gloo ranks under torchrun and the monitor, as a user runs them (issue 37): a rank slowed in
its compute, in its DataLoader and in a loader-less ``get_batch`` is each named with its
cause; none is named unslowed; every rank's step split is in ``ranks[]``.

The runs are shared (tests/support/shared_runs.py) with tests/test_collectives.py where
their parameters match.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.torchrun import input_slowed_ddp, monitored_torchrun, unslowed_ddp

pytestmark = [pytest.mark.torch, pytest.mark.timeout(300)]


def named(line: dict[str, Any]) -> list[tuple[int | None, str]]:
    return [(f["rank"], f["title"]) for f in line["findings"] if f["id"] == "ranks.straggler"]


def test_a_rank_slowed_in_a_loader_less_get_batch_is_named_for_its_input(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run = monitored_torchrun(
        tmp_path_factory, 2, "ddp", "steps=120", "slow_rank=1", "slow_data_ms=30", "loader=none"
    )
    found = named(run.summary)
    assert found == [(1, "Straggler: rank 1 waits for data, and the other ranks wait for rank 1")]
    evidence = next(f for f in run.summary["findings"] if f["id"] == "ranks.straggler")["evidence"]
    assert any(
        "on its input (its host's time before its forward, host gap; hook)" in e for e in evidence
    )
    # Its data-wait says nothing (no DataLoader); its input does.
    slowed = run.summary["ranks"][1]
    assert slowed["input_ms"] > 20.0 > run.summary["ranks"][0]["input_ms"]
    # Every line that names a rank names rank 1 for its input.
    assert {title for line in run.lines for _, title in named(line)} == {found[0][1]}


def test_a_rank_slowed_in_its_compute_is_named_for_its_compute(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run = monitored_torchrun(
        tmp_path_factory, 2, "ddp", "steps=120", "slow_rank=1", "slow_step_ms=30"
    )
    titles = {title for line in run.lines for _, title in named(line)}
    assert titles == {"Straggler: rank 1 computes slower, and the other ranks wait for rank 1"}


def test_a_rank_slowed_in_its_dataloader_is_named_for_its_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    found = named(input_slowed_ddp(tmp_path_factory).summary)
    assert found and found[0][0] == 1 and "waits for data" in found[0][1]


def test_unslowed_ranks_have_each_their_step_split_and_no_straggler(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run = unslowed_ddp(tmp_path_factory)
    assert [t for line in run.lines for t in named(line)] == []
    for rank in run.summary["ranks"]:
        parts = rank["step_parts"]
        assert parts["clock"] == "host" and parts["forward_ms"] > 0 and parts["backward_ms"] > 0
        assert rank["input_ms"] is not None and rank["comm_ms_p50"] is not None
