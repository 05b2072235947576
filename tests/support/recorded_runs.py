"""Recorded CPU runs of the sleepy loop (tests/scenarios/loops.py), made as a user makes them
(``gputop-train --headless --record``), several at once: the sleeps set their timings, so runs
made side by side on a loaded box still differ only where their arguments do."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from .paths import REPO, SCENARIOS


def record_sleepy(runs: dict[str, tuple[str, ...]], folder: Path, timeout: float = 300.0) -> None:
    """``folder/NAME.jsonl`` for each NAME: ``sleepy PARAMS``, all started together (the
    monitor's stderr in ``folder/NAME.err``)."""
    with contextlib.ExitStack() as stack:
        started = []
        for name, params in runs.items():
            err = stack.enter_context((folder / f"{name}.err").open("w"))
            record = ("--record", str(folder / f"{name}.jsonl"))
            command = [sys.executable, "-m", "gputop_train", "--headless", "--interval", "5",
                       *record, str(SCENARIOS), "sleepy", *params]  # fmt: skip
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
            started.append((name, process))
        for name, process in started:
            code = process.wait(timeout=timeout)
            assert code == 0, f"{name}: {(folder / f'{name}.err').read_text()[-2000:]}"
