"""A torchrun job of CPU gloo ranks (tests/scenarios/collectives.py) under the monitor, as a
user runs it; shared by the tests that read the same run (shared_runs)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import shared_runs
from .cli import gputop
from .paths import REPO

SCENARIO = REPO / "tests" / "scenarios" / "collectives.py"
# torchrun as a user's command line runs it, with this interpreter (a test's venv).
TORCHRUN = (sys.executable, "-m", "torch.distributed.run")


def standalone_torchrun(ranks: int) -> tuple[str, ...]:
    """``torchrun --standalone --nproc-per-node RANKS``: one node's job, the script to follow."""
    return (*TORCHRUN, "--standalone", "--nproc-per-node", str(ranks))


@dataclass
class TorchrunRun:
    lines: list[dict[str, Any]]  # the headless JSON objects, the summary last
    truth: dict[int, dict[str, list[float]]]  # rank -> its own clock ("comm", "step_ms")
    folder: Path  # run.jsonl (with ``record``), the stall dumps beside it

    @property
    def summary(self) -> dict[str, Any]:
        return self.lines[-1]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.folder / "run.jsonl").read_text().splitlines()]


def monitored_torchrun(
    factory: pytest.TempPathFactory,
    ranks: int,
    scenario: str,
    *params: str,
    record: bool = False,
    monitor: tuple[str, ...] = (),
) -> TorchrunRun:
    """``gputop-train --headless --format json --interval 1 -- torchrun --nproc-per-node
    RANKS collectives.py SCENARIO PARAMS``, recorded into the run's folder with ``record``."""

    def make(folder: Path) -> dict[str, Any]:
        truth_dir = folder / "truth"
        truth_dir.mkdir(exist_ok=True)
        recording = ("--record", str(folder / "run.jsonl")) if record else ("--no-record",)
        result = gputop(
            "--headless", "--format", "json", "--interval", "1", *recording, *monitor, "--",
            *standalone_torchrun(ranks), str(SCENARIO), scenario, f"truth_dir={truth_dir}", *params,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        truth = {
            path.stem.split("-")[1]: json.loads(path.read_text())
            for path in truth_dir.glob("rank-*.json")
        }
        return {"lines": [json.loads(line) for line in result.stdout.splitlines()], "truth": truth}

    key = ("torchrun", ranks, scenario, params, record, monitor)
    made, folder = shared_runs.once(factory, key, make)
    truth = {int(rank): own for rank, own in made["truth"].items()}
    assert sorted(truth) == list(range(ranks))
    return TorchrunRun(made["lines"], truth, folder)


def unslowed_ddp(factory: pytest.TempPathFactory) -> TorchrunRun:
    """Two DDP ranks, neither slowed, recorded: read by the straggler test (none named) and
    the launcher's (each rank hooked, the samples adding up)."""
    return monitored_torchrun(factory, 2, "ddp", "steps=100", record=True)


def input_slowed_ddp(factory: pytest.TempPathFactory) -> TorchrunRun:
    """Two DDP ranks, rank 1's every batch 30 ms late: read by the straggler test (rank 1
    named for its data) and the ranks' data-wait figures."""
    return monitored_torchrun(factory, 2, "ddp", "steps=100", "slow_rank=1", "slow_data_ms=30")
