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

    python -m benchmarks.diagnosis.scorecard                    # every scenario; docs/diagnosis.md
    python -m benchmarks.diagnosis.scorecard --only launch_bound sync_heavy_loss --out /tmp/d
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common.monitored import run_until_pilot_done
from benchmarks.common.paths import SCENARIOS
from benchmarks.common.provenance import provenance

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
        Scenario(
            "grad_accum_no_loader", ("item_per_micro=false", "precision=bf16", "micro_batch=*2")
        ),
        Scenario("gpu_bound_healthy", ("compile=true", "batch_size=*2")),
        Scenario("memory_near_limit", ("batch_size=/2",)),
        Scenario("trainer_loop", ("precision=bf16", f"num_workers={cores - 1}")),
        # Storage-bound workers beside a CPU hog on every core: more workers overlap the reads.
        Scenario("input_beside_cpu_hog", ("num_workers=8",)),
        *transformer_corpus(cores),
    ]


def transformer_corpus(cores: int) -> list[Scenario]:
    """The transformer scenarios (issue 26): GPT loops as their users write them. Each
    compile trial costs ~35 s of warm-up on the H100: the candidates fit one 9-minute call."""
    return [
        Scenario("gpt_manual_attention", ("attention=sdpa",)),
        Scenario("gpt_fp32", ("precision=bf16", "matmul_precision=high")),
        Scenario("nanogpt_eager", ("compile=true",)),
        Scenario("gpt_trainer_sync", ("nan_inf_filter=false", "batch_size=*2")),
        Scenario("gpt_tokenizer_loader", (f"num_workers={cores - 1}",)),
        Scenario("gpt_memory_limit", ("checkpointing=true", "compile=true")),
        Scenario("gpt_compiled_sdpa", ("batch_size=*2",)),
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
    options = [arg for fix in scenario.tries for arg in ("--try", fix)]
    script = [str(SCENARIOS / f"{scenario.name}.py"), *scenario.args, *extra]
    summary = run_until_pilot_done(options, script, out / scenario.name, SCENARIO_TIMEOUT_S)
    summary["knob_roles"] = _knob_roles(out / f"{scenario.name}.jsonl")
    return summary


def _knob_roles(record: Path) -> dict[str, str | None]:
    roles: dict[str, str | None] = {}
    for line in record.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "knobs":
            roles.update({k["name"]: k.get("role") for k in event["knobs"]})
    return roles


def carries(change: dict[str, Any], arm: str, role: str | None) -> bool:
    """Whether the --try ``arm`` (knob=value) applies the finding's ``change``: same role, and
    for a switch or a choice the same value ("gpu" is carried by "gpu-resize"); a number is
    sized by the advisor and by the corpus differently, the role decides."""
    if role != change["role"]:
        return False
    target, value = change["value"], arm.split("=", 1)[1]
    if isinstance(target, bool):
        return value.lower() == str(target).lower()
    if isinstance(target, str) and target != "double":
        return value == target or value.startswith(f"{target}-")
    return True


def judge(name: str, summary: dict[str, Any]) -> Outcome:
    """The verdict of one scenario from its summary (pure: unit-tested)."""
    phases = summary["phases"]
    autopilot = summary.get("autopilot") or summary.get("figures", {}).get("autopilot") or {}
    trials = autopilot.get("trials") or []
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
    elif headline_id in HEALTHY:  # "healthy" is said only when no candidate gains 10%
        verdict = f"wrong: says healthy, yet {best} gained {best_gain:.2f}x"
    else:  # the gain of the first change that a measured fix carries: the one it would apply
        headline_gain = next(
            (
                measured[arm]
                for change in changes
                for arm in measured
                if carries(change, arm, roles.get(arm))
            ),
            None,
        )
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


def rejudge(directory: Path) -> tuple[list[Outcome], list[float]]:
    """The verdicts of recorded runs, with the advisor as it is now: replay feeds the recorded
    inputs to a fresh session, so the headlines are this code's; the gains are as measured.
    Also the recordings' start times."""
    from gputop_train.record.reader import read, replay_all
    from gputop_train.record.summary import summarize

    outcomes, started = [], []
    for path in sorted(directory.glob("*.jsonl")):
        recording = read(path)
        summary = summarize(replay_all(recording), recording.meta)
        summary["knob_roles"] = _knob_roles(path)
        outcomes.append(judge(path.stem, summary))
        started.append(recording.started_at)
    return outcomes, started


def scorecard(outcomes: list[Outcome], machine: str, command: str, when: str) -> str:
    right = sum(o.verdict.startswith("right") for o in outcomes)
    contradicted = sum(bool(o.contradictions) for o in outcomes)
    lines = [
        "# Diagnosis scorecard",
        "",
        "Written by `benchmarks/diagnosis/scorecard.py` (method: its docstring, docs/advisor.md).",
        "",
        f"- machine: {machine}",
        f"- date: {when}",
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
    parser.add_argument(
        "--rejudge",
        nargs="*",
        type=Path,
        metavar="DIR",
        help="judge the recordings in DIR with the advisor as it is now (no new run)",
    )
    parser.add_argument("extra", nargs="*", help="arguments for every scenario (e.g. --small)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    if args.rejudge:
        outcomes, started = [], []
        for directory in args.rejudge:
            judged, times = rejudge(directory)
            outcomes += judged
            started += times
        order = [s.name for s in corpus(cores)]
        outcomes.sort(key=lambda o: order.index(o.scenario) if o.scenario in order else 99)
        when = (
            f"measured {_utc(min(started))} to {_utc(max(started))}; headlines by the advisor "
            f"as of {_utc(time.time())}, replaying the recordings"
        )
        return _report(args, outcomes, "see the recordings' meta", when)
    chosen = [s for s in corpus(cores) if not args.only or s.name in args.only]
    outcomes = []
    for scenario in chosen:
        try:
            outcome = judge(scenario.name, run_scenario(scenario, args.out, args.extra))
        except (RuntimeError, KeyError, ValueError, subprocess.TimeoutExpired) as error:
            outcome = Outcome(scenario.name, None, [], {}, {}, None, "error", error=str(error))
        outcomes.append(outcome)
        print(json.dumps(vars(outcome)), flush=True)
    origin = provenance()
    return _report(args, outcomes, f"{origin.machine}; commit {origin.commit}", origin.date)


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def _report(args: argparse.Namespace, outcomes: list[Outcome], machine: str, when: str) -> int:
    (args.out / "diagnosis.json").write_text(json.dumps([vars(o) for o in outcomes], indent=1))
    text = scorecard(outcomes, machine, " ".join(["python", *sys.argv]), when)
    (args.out / "diagnosis.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
