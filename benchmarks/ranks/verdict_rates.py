"""The straggler verdict's false-name rate on unslowed jobs and its detection rate on slowed
ones (advise/rank_verdict.py; docs/ranks.md, "The verdict's rates").

Each run is gloo CPU ranks of tests/scenarios/collectives.py (``ddp`` or ``fsdp``: FSDP2's
``fully_shard``) under ``gputop-train --headless --format json --interval 1``, as a user runs
them, and every live status line after warm-up is judged: a line whose advisor judged a
window (no ``advice_wait``) with every rank in it. A line is right when the straggler finding
names nobody (unslowed) or the slowed rank with its cause (slowed).

A slow node is two torchrun launches (``--nnodes 2``, c10d rendezvous on loopback), each under
its own monitor, every rank of torchrun's node 1 slowed alike (``slow_node=1``); each node's
monitor sees its own ranks only, so its lines are judged as the job view judges the job: the
verdict (``judge``) over both monitors' per-rank figures, line by line, held over the last
HOLD_WINDOWS lines, each monitor one node.

    python -m benchmarks.ranks.verdict_rates unslowed --ranks 2 4 --scenarios ddp fsdp
    heavy -x python -m benchmarks.ranks.verdict_rates unslowed --ranks 2 --hogs 2
    python -m benchmarks.ranks.verdict_rates input compute --ranks 2 4
    python -m benchmarks.ranks.verdict_rates node --ranks 4

``--hogs N`` runs N busy loops beside each job (each bounded by ``timeout``), the load the
verdict flickered under (issue 37). ``--out FILE`` appends one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common.hogs import cpu_hogs
from gputop_train.advise.rank_verdict import HOLD_WINDOWS, MIN_STEPS, RankWindow, Verdict, judge

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "tests" / "scenarios" / "collectives.py"
TORCHRUN = (sys.executable, "-m", "torch.distributed.run")
MONITOR = (sys.executable, "-m", "gputop_train", "--headless", "--format", "json")
# Every job: a 20 ms step of "compute" (a sleep inside the forward) and a gloo exchange.
JOB = ("batch=8", "step_ms=20")
# What each case slows, and what a right line names: the rank and the title's cause words.
SLOWED = {
    "unslowed": ((), None, None),
    "input": (("slow_rank=1", "slow_data_ms=30"), (1,), "waits for data"),
    "compute": (("slow_rank=1", "slow_step_ms=30"), (1,), "computes slower"),
}
RUN_TIMEOUT_S = 420


@dataclass
class Run:
    """One job's lines, as judged."""

    case: str
    scenario: str
    ranks: int
    hogs: int
    steps: int
    lines: int = 0  # live status lines
    judged: int = 0  # after warm-up: the advisor judged a window with every rank in it
    right: int = 0
    named: dict[str, int] = field(default_factory=dict)  # what the wrong lines named, counted
    seconds: float = 0.0
    load_1min: float = 0.0

    @property
    def rate(self) -> float | None:
        return self.right / self.judged if self.judged else None


def monitored(
    ranks: int, scenario: str, steps: int, extra: Sequence[str], torchrun: Sequence[str]
) -> list[str]:
    """The monitor's command line around one torchrun launch."""
    return [
        *MONITOR, "--interval", "1", "--no-record", "--",
        *TORCHRUN, *torchrun, "--nproc-per-node", str(ranks),
        str(SCENARIO), scenario, *JOB, f"steps={steps}", *extra,
    ]  # fmt: skip


def lines_of(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def live(lines: list[dict[str, Any]], ranks: int) -> tuple[list[dict[str, Any]], int]:
    """The status lines judged after warm-up (the advisor judged a window, every rank in it
    with MIN_STEPS), and the live lines in all."""
    status = [line for line in lines if line.get("type") == "status"]
    judged = [
        line
        for line in status
        if line.get("advice_wait") is None
        and len([r for r in line.get("ranks") or () if (r.get("steps") or 0) >= MIN_STEPS]) == ranks
    ]
    return judged, len(status)


def stragglers(line: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in line.get("findings") or () if f["id"] == "ranks.straggler"]


def judge_node_run(
    run: Run, per_node: list[list[dict[str, Any]]], expected: tuple[int, ...] | None
) -> None:
    """Each line of node 0's monitor, with node 1's line of the same second: the verdict over
    both nodes' ranks, held over the last HOLD_WINDOWS such lines (the job view's way)."""
    first, second = per_node
    history: list[list[RankWindow]] = []
    for line in first:
        if line.get("type") != "status":
            continue
        run.lines += 1
        other = min(second, key=lambda o: abs(o["t"] - line["t"]), default=None)
        if other is None or abs(other["t"] - line["t"]) > 1.0:
            continue
        windows = [
            window
            for node, source in (("node-0", line), ("node-1", other))
            for r in source.get("ranks") or ()
            if (window := _window(node, r)) is not None
        ]
        if len(windows) < run.ranks:
            history.clear()
            continue
        history = [*history, windows][-HOLD_WINDOWS:]
        if len(history) < HOLD_WINDOWS:
            continue
        run.judged += 1
        verdict = judge(history)
        if _right_node(verdict, expected):
            run.right += 1
        else:
            key = f"{verdict.kind} {list(verdict.ranks)}" if verdict else "nothing"
            run.named[key] = run.named.get(key, 0) + 1


def _window(node: str, rank: dict[str, Any]) -> RankWindow | None:
    if rank.get("rank") is None or (rank.get("steps") or 0) < MIN_STEPS:
        return None
    return RankWindow(
        rank["rank"],
        node,
        rank["steps"],
        rank.get("step_ms_p50"),
        rank.get("comm_ms_p50"),
        rank.get("input_ms"),
    )


def _right_node(verdict: Verdict | None, expected: tuple[int, ...] | None) -> bool:
    if expected is None:
        return verdict is None or verdict.kind == "job"
    return verdict is not None and verdict.kind == "node" and verdict.ranks == expected


def judge_lines(run: Run, lines: list[dict[str, Any]], case: str) -> None:
    """Each judged line right when its straggler finding is what the case expects."""
    _, expected, cause = SLOWED[case]
    judged, run.lines = live(lines, run.ranks)
    run.judged = len(judged)
    for line in judged:
        found = stragglers(line)
        if expected is None:
            right = not found
        else:
            right = len(found) == 1 and tuple(found[0]["ranks"]) == expected
            right = right and cause is not None and cause in found[0]["title"]
        if right:
            run.right += 1
        else:
            key = "; ".join(f["title"] for f in found) or "nothing"
            run.named[key] = run.named.get(key, 0) + 1


def one_node(case: str, scenario: str, ranks: int, steps: int, hogs: int) -> Run:
    run = Run(case, scenario, ranks, hogs, steps)
    extra, _, _ = SLOWED[case]
    command = monitored(ranks, scenario, steps, extra, ("--standalone",))
    started = time.monotonic()
    with cpu_hogs(hogs, RUN_TIMEOUT_S + 60):
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=REPO
        )
    run.seconds, run.load_1min = time.monotonic() - started, os.getloadavg()[0]
    if result.returncode != 0:
        raise SystemExit(
            f"{case} {scenario} x{ranks}: exit {result.returncode}\n{result.stderr[-2000:]}"
        )
    judge_lines(run, lines_of(result.stdout), case)
    return run


def two_nodes(scenario: str, ranks: int, steps: int, hogs: int, slowed: bool) -> Run:
    """``ranks`` in all, half on each of two torchrun launches (one monitor each); with
    ``slowed``, every rank of node 1 (ranks ranks/2..) computes 30 ms more a step."""
    run = Run("node" if slowed else "unslowed, 2 nodes", scenario, ranks, hogs, steps)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rendezvous = (
        "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
        "--rdzv-id", f"verdict-{port}",
    )  # fmt: skip
    extra = ("slow_node=1", "slow_step_ms=30") if slowed else ()
    command = monitored(ranks // 2, scenario, steps, extra, rendezvous)

    def body() -> list[str]:
        monitors = [
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
            )
            for _ in range(2)
        ]
        outputs = []
        for monitor in monitors:
            out, err = monitor.communicate(timeout=RUN_TIMEOUT_S)
            if monitor.returncode != 0:
                raise SystemExit(f"node run: exit {monitor.returncode}\n{err[-2000:]}")
            outputs.append(out)
        return outputs

    started = time.monotonic()
    with cpu_hogs(hogs, RUN_TIMEOUT_S + 60):
        outputs = body()
    run.seconds, run.load_1min = time.monotonic() - started, os.getloadavg()[0]
    per_node = [lines_of(out) for out in outputs]
    # Node 1 of torchrun (ranks ranks/2..) may be either launch: order them by their ranks.
    per_node.sort(key=lambda lines: min((r["rank"] for r in lines[-1]["ranks"]), default=0))
    expected = tuple(range(ranks // 2, ranks)) if slowed else None
    judge_node_run(run, per_node, expected)
    # What each node's own advisor said: one node sees no straggler among its alike ranks.
    for node, lines in enumerate(per_node):
        judged, _ = live(lines, ranks // 2)
        named = sum(bool(stragglers(line)) for line in judged)
        run.named[f"node {node}'s monitor named a rank"] = named
    return run


def _provenance() -> dict[str, str]:
    """The commit, the time (UTC) and the command line a result came from."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, cwd=REPO,
    ).stdout.strip()  # fmt: skip
    return {
        "commit": commit + ("+changes" if dirty else ""),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python -m benchmarks.ranks.verdict_rates", *sys.argv[1:]]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", choices=[*SLOWED, "node", "unslowed-nodes"])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2])
    parser.add_argument("--scenarios", nargs="+", default=["ddp"], choices=["ddp", "fsdp"])
    parser.add_argument("--hogs", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for case in args.cases:
        for scenario in args.scenarios:
            for ranks in args.ranks:
                if case in ("node", "unslowed-nodes"):
                    run = two_nodes(scenario, ranks, args.steps, args.hogs, case == "node")
                else:
                    run = one_node(case, scenario, ranks, args.steps, args.hogs)
                rate = "N/A" if run.rate is None else f"{100 * run.rate:.1f}%"
                print(
                    f"| {run.case} | {scenario} | {ranks} | {args.hogs} | {run.lines} "
                    f"| {run.judged} | {run.right} ({rate}) | {run.named or ''} "
                    f"| {run.seconds:.0f} s, load {run.load_1min:.1f} |",
                    flush=True,
                )
                if args.out:
                    said = {**asdict(run), "rate": run.rate, **_provenance()}
                    with args.out.open("a") as out:
                        out.write(json.dumps(said) + "\n")


if __name__ == "__main__":
    main()
