"""How far apart a torchrun job's ranks read without a straggler, and whether the straggler
finding names the slowed rank: the measurement behind the straggler verdict's lines
(advise/rank_verdict.py; its rates on 2, 4 and 8 ranks: benchmarks/ranks/verdict_rates.py).

Each round runs 2 (``--nproc``) CPU ranks (gloo) of tests/scenarios/loops.py ``ddp`` under
``gputop-train --headless --format json``, unslowed and with one rank slowed on purpose, and
reads every status line with every rank measured (the live window, as the advisor sees it).
The comm gap is the others' median wait in collectives less the least-waiting rank's, as a
share of the median step (advise/rank_verdict.py's GAP_SHARE line).

    python -m benchmarks.ranks.stragglers --rounds 3 [--nproc 4]
    python -m benchmarks.ranks.stragglers --hogs 2 --cpu-bound --cases unslowed --hold-windows 1

``--hogs N`` runs N busy-looping processes beside each job (a loaded box: the line is judged
where it flickered, issue 37); the table then counts the lines that name a rank.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOPS = REPO / "tests" / "scenarios" / "loops.py"
# ``--cpu-bound``: each step is real CPU work (matmuls on the host) rather than a sleep, so a
# busy loop beside the job takes its cores from one rank, then another.
CPU_BOUND = (
    str(REPO / "tests" / "scenarios" / "collectives.py"), "ddp", "width=512", "batch=256",
    "step_ms=0",
)  # fmt: skip
MIN_STEPS = 5
HOLD_MONITOR = (
    "import sys; from gputop_train.advise import rank_verdict, stragglers; from "
    "gputop_train.session import model; "
    "rank_verdict.HOLD_WINDOWS = stragglers.HOLD_WINDOWS = model.HOLD_WINDOWS = {}; "
    "from gputop_train.cli import main; sys.exit(main(sys.argv[1:]))"
)

CASES = {  # rank 1 is slowed; with 4 ranks too
    "unslowed": [],
    "rank 1 input +30 ms": ["slow_rank=1", "slow_data_ms=30"],
    "rank 0 input +15 ms": ["slow_rank=0", "slow_data_ms=15"],
    "rank 1 compute +30 ms": ["slow_rank=1", "slow_step_ms=30"],
}


def run_case(
    extra: list[str],
    steps: int,
    nproc: int = 2,
    hold_windows: int | None = None,
    cpu_bound: bool = False,
) -> list[dict]:
    """The status lines (and the summary) of one monitored torchrun job; ``hold_windows``:
    the monitor's HOLD_WINDOWS (session/comm.py) set to it (1: the window's median alone)."""
    monitor = ["-m", "gputop_train"]
    if hold_windows is not None:
        monitor = ["-c", HOLD_MONITOR.format(hold_windows)]
    command = [
        sys.executable, *monitor, "--headless", "--format", "json",
        "--interval", "1", "--no-record", "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc),
        *(CPU_BOUND if cpu_bound else (str(LOOPS), "ddp", "batch=8", "step_ms=20")),
        f"steps={steps}", *extra,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(extra)}: exit {result.returncode}\n{result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def spreads(
    lines: list[dict], nproc: int = 2
) -> tuple[list[float], list[float], list[float], set[str]]:
    """Per line with every rank measured: data-wait max-min (points), step p50 max/min, the
    comm gap (% of the step), and the straggler findings' titles."""
    waits: list[float] = []
    ratios: list[float] = []
    gaps: list[float] = []
    named: set[str] = set()
    for line in lines:
        ranks = [r for r in line.get("ranks") or () if (r["steps"] or 0) >= MIN_STEPS]
        if len(ranks) < nproc:
            continue
        comm = sorted(r["comm_ms_p50"] for r in ranks if r.get("comm_ms_p50") is not None)
        steps = sorted(r["step_ms_p50"] for r in ranks if r["step_ms_p50"])
        if len(comm) == len(ranks) and steps:
            others = statistics.median(comm[1:])
            gaps.append(100.0 * (others - comm[0]) / statistics.median(steps))
        wait = [r["data_wait_pct"] for r in ranks if r["data_wait_pct"] is not None]
        step = [r["step_ms_p50"] for r in ranks if r["step_ms_p50"]]
        if len(wait) == len(ranks):
            waits.append(max(wait) - min(wait))
        if len(step) == len(ranks):
            ratios.append(max(step) / min(step))
        named |= {f["title"] for f in line["findings"] if f["id"] == "ranks.straggler"}
    return waits, ratios, gaps, named


def naming_lines(lines: list[dict]) -> tuple[int, int, set[int]]:
    """Status lines with a straggler named, status lines judged, and the ranks named."""
    judged = [line for line in lines if line.get("type") != "summary" and line.get("ranks")]
    named = [
        f["rank"]
        for line in judged
        for f in line["findings"]
        if f["id"] == "ranks.straggler" and f.get("rank") is not None
    ]
    hits = sum(any(f["id"] == "ranks.straggler" for f in line["findings"]) for line in judged)
    return hits, len(judged), set(named)


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """Busy loops beside the job, each its own process."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside each job")
    parser.add_argument(
        "--hold-windows", type=int, help="the monitor's HOLD_WINDOWS (default: its own)"
    )
    parser.add_argument("--cpu-bound", action="store_true", help="steps of CPU work, no sleep")
    parser.add_argument("--cases", nargs="*", default=list(CASES), help="of: " + ", ".join(CASES))
    args = parser.parse_args()
    cases = {name: CASES[name] for name in args.cases}
    results: dict[str, tuple[list[float], list[float], list[float], set[str]]] = {
        name: ([], [], [], set()) for name in cases
    }
    hits_of = dict.fromkeys(cases, 0)
    judged_of = dict.fromkeys(cases, 0)
    ranks_of: dict[str, set[int]] = {name: set() for name in cases}
    for _ in range(args.rounds):
        for name, extra in cases.items():  # side by side, round after round
            hogs = start_hogs(args.hogs)
            try:
                lines = run_case(extra, args.steps, args.nproc, args.hold_windows, args.cpu_bound)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            hits, judged, ranks = naming_lines(lines)
            hits_of[name] += hits
            judged_of[name] += judged
            ranks_of[name] |= ranks
            waits, ratios, gaps, named = spreads(lines, args.nproc)
            results[name][0].extend(waits)
            results[name][1].extend(ratios)
            results[name][2].extend(gaps)
            results[name][3].update(named)
    head = (
        "case", "lines", "data-wait spread, points (max)", "step p50 max/min (max)",
        "comm gap, % of step (min-max)", "named",
    )  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|---|---|---|")
    nan = float("nan")
    for name, (waits, ratios, gaps, named) in results.items():
        print(
            f"| {name} | {len(waits)} | {max(waits, default=nan):.1f} "
            f"| {max(ratios, default=nan):.3f} "
            f"| {min(gaps, default=nan):.1f}-{max(gaps, default=nan):.1f} "
            f"| {'; '.join(sorted(named)) or 'none'} |"
        )
    print(f"\nlines naming a rank ({args.hogs} busy loops beside each job):")
    for name in cases:
        hits, judged = hits_of[name], judged_of[name]
        share = f"{100.0 * hits / judged:.0f}%" if judged else "N/A"
        print(f"- {name}: {hits} of {judged} ({share}), ranks {sorted(ranks_of[name]) or 'none'}")


if __name__ == "__main__":
    main()
