"""The autopilot on the demo (or any script with knobs): from its first configuration to where
the advisor stops, with no human input. Prints the trial table and the throughput reached.

    python -m benchmarks.autopilot.climb --out /tmp/ap                       # the demo at rung 0
    python -m benchmarks.autopilot.climb --out /tmp/ap -- benchmarks/scenarios/launch_bound.py

``--corpus [NAME ...]`` runs it on the scenarios of the diagnosis corpus instead (all, or the
named ones), one after the other, each under its own ``--budget``; the arguments after
``--`` go to every scenario. ``--against DIR ...``
compares where each scenario ended with its best single fix as ``benchmarks/diagnosis/scorecard.py``
measured it (its ``--out`` directories, whose recordings hold the gains): the issue asks that
the autopilot end at least as fast. With ``--against`` alone, the runs already in ``--out``
are compared, without running anything.

    python -m benchmarks.autopilot.climb --out /tmp/apc --budget 1.5 --corpus
    python -m benchmarks.autopilot.climb --out /tmp/apc --against /tmp/dA /tmp/dB
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.common.monitored import run_until_pilot_done
from benchmarks.common.paths import REPO
from benchmarks.diagnosis.scorecard import MARGIN, SCENARIOS, corpus, rejudge

# The autopilot's own floor for a gain it keeps (gputop_train.autopilot.pilot.MIN_GAIN_PCT):
# ends this close to the best single fix are within the noise of the two measurements.
WITHIN_NOISE = 0.97


def run(
    script: list[str], out: Path, budget_min: float, settle_s: float = 0.0, name: str = ""
) -> dict[str, Any]:
    """One autopilot run to its end (and ``settle_s`` on, run_until_pilot_done); prints its
    trial table, returns its summary line. The files are ``out/NAME.*``, the script's stem."""
    name = name or Path(script[0]).stem
    options = ["--autopilot", "--autopilot-budget", str(budget_min)]
    summary = run_until_pilot_done(options, script, out / name, 60 * budget_min + 120, settle_s)
    (out / f"{name}.result.json").write_text(json.dumps(summary, indent=1))
    pilot = summary.get("autopilot") or {}
    print(f"{name}: {pilot.get('state')} after {summary['wall_s']:.0f} s")
    for trial in pilot.get("trials") or []:
        gain = "N/A" if trial.get("gain") is None else f"{trial['gain']:.2f}x"
        print(
            f"  {trial['change']:<28} from {trial['source']:<26} "
            f"{trial.get('baseline_samples_per_s') or 0:>9,.0f} -> "
            f"{trial.get('samples_per_s') or 0:>9,.0f} samples/s "
            f"{gain:>6}  {trial['decision']}: {trial['reason']}"
        )
    first, last = start_and_end(summary)
    if first and last:
        print(
            f"  phase 1 {first['samples_per_s']:,.0f} -> last measured phase {last['phase']} "
            f"({last['change']}) {last['samples_per_s']:,.0f} samples/s: "
            f"{last['samples_per_s'] / first['samples_per_s']:.2f}x",
            flush=True,
        )
    return summary


def start_and_end(summary: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first phase (the script as written) and the last one measured."""
    measured = [p for p in summary.get("phases") or [] if p.get("samples_per_s")]
    if not measured:
        return None, None
    return measured[0], max(measured, key=lambda p: p["phase"])


def compare(out: Path, against: list[Path]) -> list[dict[str, Any]]:
    """Each autopilot run in ``out`` beside the best single fix measured in ``against``."""
    best: dict[str, tuple[str | None, float | None]] = {}
    for directory in against:
        for outcome in rejudge(directory)[0]:
            gains = {fix: g for fix, g in outcome.gains.items() if g is not None}
            top = max(gains, key=lambda fix: gains[fix]) if gains else None
            best[outcome.scenario] = (top, gains[top] if top else None)
    rows = []
    for path in sorted(out.glob("*.result.json")):
        name = path.name.removesuffix(".result.json")
        first, last = start_and_end(json.loads(path.read_text()))
        ended = last["samples_per_s"] / first["samples_per_s"] if first and last else None
        fix, fix_gain = best.get(name, (None, None))
        # As the scorecard counts them: a fix under the 10% margin does not pay, and a
        # scenario where none pays is healthy; there ending where it began is enough.
        bar = fix_gain if fix_gain and fix_gain >= MARGIN else 1.0
        kept = _kept_on_knob(json.loads(path.read_text()), fix)
        verdict = (
            "N/A"
            if ended is None or name not in best
            else (
                "yes" if ended >= bar else "within noise" if ended >= WITHIN_NOISE * bar else "no"
            )
        )
        rows.append(
            {
                "scenario": name,
                "ended_x": ended,
                "best_fix": fix,
                "best_fix_x": fix_gain,
                "kept_on_its_knob": kept,
                "at_least_as_fast": verdict,
            }
        )
        ended_text = "N/A" if ended is None else f"{ended:.2f}x"
        fix_text = "N/A" if fix_gain is None else f"{fix} {fix_gain:.2f}x"
        print(
            f"{name:<22} autopilot {ended_text:>7}  best single fix {fix_text:<27} "
            f"kept: {kept or '-':<18} {verdict}"
        )
    (out / "against.json").write_text(json.dumps(rows, indent=1))
    return rows


def _kept_on_knob(summary: dict[str, Any], fix: str | None) -> str | None:
    """The change the autopilot kept on the best fix's knob ("num_workers=16"), if any."""
    if fix is None:
        return None
    knob = fix.split("=")[0]
    trials = (summary.get("autopilot") or {}).get("trials") or []
    kept = [t["change"] for t in trials if t["decision"] == "kept"]
    return next((c for c in reversed(kept) if c.split("=")[0] == knob), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/gputop-autopilot"))
    parser.add_argument("--budget", type=float, default=10.0, help="minutes (--autopilot-budget)")
    parser.add_argument("--corpus", nargs="*", metavar="NAME", help="diagnosis scenarios")
    parser.add_argument("--against", nargs="*", type=Path, metavar="DIR", default=[])
    parser.add_argument(
        "script",
        nargs="*",
        help="the script and its arguments (the demo when none); with "
        "--corpus, arguments for every scenario (--small on a CPU)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.corpus is not None:
        cores = os.cpu_count() or 1
        for scenario in corpus(cores):
            if not args.corpus or scenario.name in args.corpus:
                script = [str(SCENARIOS / f"{scenario.name}.py"), *scenario.args, *args.script]
                try:
                    run(script, args.out, args.budget)
                except RuntimeError as error:  # one scenario's failure is reported, not fatal
                    print(f"{scenario.name}: {error}", flush=True)
    elif not args.against:
        run(args.script or [str(REPO / "demos" / "resnet.py")], args.out, args.budget)
    if args.against:
        compare(args.out, args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
