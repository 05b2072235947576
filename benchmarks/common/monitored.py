"""Run a script under ``gputop-train --headless --format json`` until its autopilot (or its
--try survey) is done, then stop the job with Ctrl+C and keep the summary: what the
diagnosis and autopilot benchmarks share."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .paths import REPO


def run_until_pilot_done(
    options: list[str], script: list[str], stem: Path, timeout_s: float, settle_s: float = 0.0
) -> dict[str, Any]:
    """The summary line; the recording is ``stem``.jsonl, the job's output ``stem``.log, the
    monitor's own stderr ``stem``.monitor.log. ``settle_s``: how long the job runs on in the
    configuration the autopilot left before it is stopped (its end then measured as a run
    started in it would be). The summary also carries, by the wall clock the job's own meters
    use, when the first trial showed (``first_change_t``) and when the pilot said it was done
    (``done_t``), None where it never did."""
    command = [sys.executable, "-m", "gputop_train", "--headless", "--format", "json"]
    command += ["--record", f"{stem}.jsonl", *options, *script]
    with Path(f"{stem}.monitor.log").open("w") as log:
        monitor = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
        )
        started, summary, done_at, interrupted = time.monotonic(), None, None, False
        wall: dict[str, float | None] = {"first_change_t": None, "done_t": None}
        assert monitor.stdout is not None
        for line in monitor.stdout:
            fields = json.loads(line)
            if fields.get("type") == "summary":
                summary = fields
                break
            pilot = fields.get("autopilot") or {}
            if pilot.get("trials") and wall["first_change_t"] is None:
                wall["first_change_t"] = time.time()
            if pilot.get("done") and done_at is None:
                done_at, wall["done_t"] = time.monotonic(), time.time()
            settled = done_at is not None and time.monotonic() - done_at >= settle_s
            late = time.monotonic() - started > timeout_s + settle_s
            if (settled or late) and not interrupted:
                monitor.send_signal(signal.SIGINT)  # passed on to the job, which stops
                interrupted = True
        monitor.wait(timeout=120)
    if summary is None:
        raise RuntimeError(f"no summary (see {stem}.monitor.log and {stem}.log)")
    summary["wall_s"] = time.monotonic() - started
    return summary | wall
