"""Ctrl+C on a torchrun job under the monitor: how long until none of the job's processes is
left, and what the monitor said (docs/exits.md, "A job that will not stop").

Starts ``gputop-train --headless --format json -- torchrun --nproc-per-node N
tests/scenarios/collectives.py SCENARIO PARAMS``, waits for ``--after-steps`` steps, sends
SIGINT to the monitor (as Ctrl+C in its terminal: the monitor passes it on), then looks every
0.1 s for the job's processes (each carries a unique ``tag=`` argument) until none is left.

    python -m benchmarks.ranks.stop_hung --scenario fsdp device=cuda slow_rank=1 hang_on_sigint=1
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "tests" / "scenarios" / "collectives.py"
LIMIT_S = 45.0  # how long the job gets to be gone after the SIGINT: the ladder needs ~15 s


def job_processes(tag: str, monitor: int) -> list[int]:
    """The live (not zombie) processes whose command line carries ``tag``, but the monitor's."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        info = process.info
        if info["pid"] == monitor or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if tag in " ".join(info["cmdline"] or ()):
            found.append(info["pid"])
    return found


def stop_once(scenario: str, params: list[str], nproc: int, after_steps: int) -> dict:
    tag = f"tag=stop-{uuid.uuid4().hex[:8]}"
    command = [
        sys.executable, "-m", "gputop_train", "--headless", "--format", "json", "--interval",
        "1", "--no-record", "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), str(SCENARIO), scenario, "steps=1000000", tag, *params,
    ]  # fmt: skip
    monitor = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    threading.Thread(target=lambda: said.extend(monitor.stderr or ()), daemon=True).start()
    assert monitor.stdout is not None
    for line in monitor.stdout:
        if line.startswith("{") and json.loads(line).get("total_steps", 0) >= after_steps:
            break
    else:
        raise SystemExit(f"the job never reached {after_steps} steps:\n{''.join(said)[-3000:]}")
    threading.Thread(target=lambda: monitor.stdout and monitor.stdout.read(), daemon=True).start()
    before = job_processes(tag, monitor.pid)
    interrupted = time.monotonic()
    monitor.send_signal(signal.SIGINT)
    gone_s = None
    while time.monotonic() - interrupted < LIMIT_S:
        if not job_processes(tag, monitor.pid):
            gone_s = time.monotonic() - interrupted
            break
        time.sleep(0.1)
    try:
        code = monitor.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:  # said in the result; the monitor ends its job itself
        monitor.send_signal(signal.SIGTERM)
        code = monitor.wait()
    exited_s = time.monotonic() - interrupted
    time.sleep(0.5)
    return {
        "scenario": scenario,
        "params": params,
        "processes_before": len(before),
        "gone_after_s": None if gone_s is None else round(gone_s, 2),
        "monitor_exit_code": code,
        "monitor_exited_after_s": round(exited_s, 2),
        "left_after_monitor": job_processes(tag, monitor.pid),
        "monitor_said": [line.rstrip() for line in said if line.startswith("gputop-train:")],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="ddp")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--after-steps", type=int, default=30)
    parser.add_argument("--json", type=Path)
    parser.add_argument("params", nargs="*", help="the scenario's key=value parameters")
    args = parser.parse_args()
    result = stop_once(args.scenario, args.params, args.nproc, args.after_steps)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
