"""Is the advice right? Each scenario's headline, checked against the measured gain of every
candidate fix, applied to the same running job.

For each scenario of benchmarks/scenarios/: run it under
``gputop-train --headless --format json --try FIX --try FIX ...``; the headline is the
advisor's over the first phase (the scenario as written, warm-up excluded). Each --try applies
one fix at a step boundary, measures it (warm-up excluded, docs/phases.md), reverts it and
measures the baseline again, so fixes and baselines alternate in one process. A fix's gain is
its samples/s over the mean of the baselines before and after it.

Verdict: where no fix gains 10%, the scenario is healthy and the headline is right when it
says so (GPU-bound, or memory near its limit). Otherwise the headline is right when its change
is the measured best within 10%. A finding that says a change "will not help" is contradicted
when that change gained 10% or more.

    python benchmarks/diagnosis.py                    # every scenario; docs/diagnosis.md
    python benchmarks/diagnosis.py --only launch_bound sync_heavy_loss --out /tmp/d
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "benchmarks" / "scenarios"
# A fix must gain this much to count (the "within 10%"), both ways.
MARGIN = 1.10
HEALTHY = ("gpu.bound", "gpu.memory_near_limit")
SCENARIO_TIMEOUT_S = 420.0


@dataclass(frozen=True)
class Scenario:
    name: str
    tries: tuple[str, ...]  # --try values: each one candidate fix
    args: tuple[str, ...] = ()


def corpus(cores: int) -> list[Scenario]:
    """The candidate fixes of each scenario, sized for this machine."""
    return [
        Scenario("input_idle_cores", (f"num_workers={cores - 1}", "input=uint8", "precision=bf16")),
        Scenario("input_all_cores_busy", (f"num_workers={2 * cores}", "input=gpu")),
        Scenario(
            "main_process_bound",
            ("input=uint8", f"num_workers={2 * 8}", "pin_memory=false"),
        ),
        Scenario("pageable_copies", ("pin_memory=true", "num_workers=16", "batch_size=*2")),
        Scenario("fp32_tensor_cores", ("precision=bf16", "channels_last=true", "batch_size=*2")),
        Scenario("launch_bound", ("compile=true", "batch_size=*8")),
        Scenario("sync_heavy_loss", ("sync_loss=false", "batch_size=*2")),
        Scenario("grad_accum_no_loader", ("item_per_micro=false", "precision=bf16")),
        Scenario("gpu_bound_healthy", ("compile=true", "batch_size=*2")),
        Scenario("memory_near_limit", ("batch_size=/2",)),
        Scenario("trainer_loop", ("precision=bf16", f"num_workers={cores - 1}")),
    ]


@dataclass
class Outcome:
    scenario: str
    headline: str | None
    headline_changes: list[dict[str, Any]]
    gains: dict[str, float | None]  # --try value -> gain over the baselines around it
    roles: dict[str, str | None]  # --try value -> the role of its knob
    best: str | None
    verdict: str
    contradictions: list[str] = field(default_factory=list)
    baseline_samples_per_s: float | None = None
    error: str | None = None


def run_scenario(scenario: Scenario, out: Path, extra: list[str]) -> dict[str, Any]:
    """One monitored run with the fixes tried in turn; the summary line, and the knobs."""
    record = out / f"{scenario.name}.jsonl"
    command = [sys.executable, "-m", "gputop_train", "--headless", "--format", "json"]
    command += ["--record", str(record)]
    for fix in scenario.tries:
        command += ["--try", fix]
    command += [str(SCENARIOS / f"{scenario.name}.py"), *scenario.args, *extra]
    log = (out / f"{scenario.name}.log").open("w")
    monitor = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
    )
    started, summary, interrupted = time.monotonic(), None, False
    assert monitor.stdout is not None
    for line in monitor.stdout:
        fields = json.loads(line)
        if fields.get("type") == "summary":
            summary = fields
            break
        pilot = fields.get("autopilot") or {}
        late = time.monotonic() - started > SCENARIO_TIMEOUT_S
        if (pilot.get("done") or late) and not interrupted:
            monitor.send_signal(signal.SIGINT)  # passed on to the job: it stops, we summarise
            interrupted = True
    monitor.wait(timeout=120)
    log.close()
    if summary is None:
        raise RuntimeError(f"{scenario.name}: no summary (see {out / scenario.name}.log)")
    summary["knob_roles"] = _knob_roles(record)
    return summary


def _knob_roles(record: Path) -> dict[str, str | None]:
    roles: dict[str, str | None] = {}
    for line in record.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "knobs":
            roles.update({k["name"]: k.get("role") for k in event["knobs"]})
    return roles


def judge(name: str, summary: dict[str, Any]) -> Outcome:
    """The verdict of one scenario from its summary (pure: unit-tested)."""
    phases = summary["phases"]
    trials = (summary.get("autopilot") or {}).get("trials") or []
    first = phases[0]
    findings = first.get("findings") or []
    headline = findings[0] if findings else None
    rates = {p["phase"]: p["samples_per_s"] for p in phases}
    gains: dict[str, float | None] = {}
    roles: dict[str, str | None] = {}
    for trial in trials:
        change = trial["change"]
        knob = change.split("=", 1)[0]
        roles[change] = summary.get("knob_roles", {}).get(knob)
        rate = rates.get(trial.get("phase"))
        around = [rates.get(trial["baseline_phase"]), rates.get((trial.get("phase") or 0) + 1)]
        around = [r for r in around if r]
        gains[change] = rate / (sum(around) / len(around)) if rate and around else None
    measured = {c: g for c, g in gains.items() if g is not None}
    best = max(measured, key=measured.get) if measured else None  # type: ignore[arg-type]
    best_gain = measured.get(best, 1.0) if best else 1.0
    headline_id = headline["id"] if headline else None
    changes = headline.get("changes", []) if headline else []
    if not measured:
        verdict = "not measured"
    elif best_gain < MARGIN:
        verdict = "right (healthy)" if headline_id in HEALTHY else "wrong: nothing gains 10%"
    else:
        carried = [c for c in measured if roles.get(c) in {ch["role"] for ch in changes}]
        headline_gain = max((measured[c] for c in carried), default=None)
        if headline_gain is not None and headline_gain >= best_gain / MARGIN:
            verdict = "right"
        elif headline_gain is None:
            verdict = f"wrong: no candidate carries it; best {best}"
        else:
            verdict = f"wrong: best is {best}"
    contradictions = [
        f"{finding['id']} says {role} will not help; {change} gained {gain:.2f}x"
        for finding in findings
        for role in finding.get("rules_out", [])
        for change, gain in measured.items()
        if roles.get(change) == role and gain >= MARGIN
    ]
    return Outcome(
        scenario=name,
        headline=headline_id,
        headline_changes=changes,
        gains=gains,
        roles=roles,
        best=best,
        verdict=verdict,
        contradictions=contradictions,
        baseline_samples_per_s=first.get("samples_per_s"),
    )


def scorecard(outcomes: list[Outcome], machine: str, command: str) -> str:
    right = sum(o.verdict.startswith("right") for o in outcomes)
    contradicted = sum(bool(o.contradictions) for o in outcomes)
    lines = [
        "# Diagnosis scorecard",
        "",
        "Written by `benchmarks/diagnosis.py` (method in its docstring and docs/advisor.md).",
        "",
        f"- machine: {machine}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- command: `{command}`",
        f"- headline right on **{right} of {len(outcomes)}** scenarios; "
        f"'will not help' contradicted by a measurement in {contradicted}",
        "",
        "| scenario | baseline samples/s | headline (first phase) | candidate fixes: gain "
        "| verdict |",
        "|---|---:|---|---|---|",
    ]
    for o in outcomes:
        gains = ", ".join(
            f"`{c}` {g:.2f}x" if g is not None else f"`{c}` N/A" for c, g in o.gains.items()
        )
        rate = f"{o.baseline_samples_per_s:,.0f}" if o.baseline_samples_per_s else "N/A"
        verdict = o.error or o.verdict
        if o.contradictions:
            verdict += "; contradicted: " + "; ".join(o.contradictions)
        lines.append(f"| {o.scenario} | {rate} | `{o.headline}` | {gains} | {verdict} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gputop-diagnosis"))
    parser.add_argument("--scorecard", type=Path, help="write the Markdown scorecard here")
    parser.add_argument("extra", nargs="*", help="arguments for every scenario (e.g. --small)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    chosen = [s for s in corpus(cores) if not args.only or s.name in args.only]
    outcomes = []
    for scenario in chosen:
        try:
            outcome = judge(scenario.name, run_scenario(scenario, args.out, args.extra))
        except (RuntimeError, KeyError, ValueError, subprocess.TimeoutExpired) as error:
            outcome = Outcome(scenario.name, None, [], {}, {}, None, "error", error=str(error))
        outcomes.append(outcome)
        print(json.dumps(vars(outcome)), flush=True)
    (args.out / "diagnosis.json").write_text(json.dumps([vars(o) for o in outcomes], indent=1))
    machine = f"{platform.node()}, {cores} cores, {_gpu_name()}"
    text = scorecard(outcomes, machine, " ".join(["python", *sys.argv]))
    (args.out / "diagnosis.md").write_text(text)
    if args.scorecard:
        args.scorecard.write_text(text)
    print(text)
    return 0


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    except ImportError:
        return "no torch"


if __name__ == "__main__":
    sys.exit(main())
