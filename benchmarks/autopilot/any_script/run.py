"""``--autopilot`` on scripts that declare no knob, against each single fix run in the script's
own flags, side by side in one call: the autopilot should end at least as fast as the best
single fix (issue 27). The autopilot turns only the hook's built-in knobs here.

    python -m benchmarks.autopilot.any_script.run --out /tmp/any imagenet nanogpt gpt
    python -m benchmarks.autopilot.any_script.run --out /tmp/any --budget 3 --fix-seconds 45 hf

Each script runs under ``gputop-train --headless --format json``: once with ``--autopilot``
(stopped once the autopilot is done), once per fix for ``--fix-seconds``. A throughput is a
phase's samples/s after its warm-up, or steps/s where the job's samples are unknown (nanoGPT's
get_batch). The autopilot's end is its last kept phase (its gain over its first baseline,
both measured); a fix's is its run's one phase.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.autopilot import climb
from benchmarks.common.monitored import run_until_pilot_done

# After the autopilot is done, the job runs on this long in the configuration it left, so its
# end is measured as a fix's run is (30 s after an 8 s warm-up). The autopilot now judges each
# trial once it has settled (autopilot/settle.py), but its end is still this last phase, not
# the trial that kept the last change: on the H100 (2026-11-24) the ImageNet-style trial of
# 16 workers, judged 5 s after the live change while the new workers started, read 2,072
# samples/s where a run started with -j 16 read 3,299.
SETTLE_S = 30.0

HERE = Path(__file__).resolve().parent

# name: (script, its own arguments, its time-limit flag, {fix label: the fix's flags})
SCRIPTS: dict[str, tuple[str, list[str], str, dict[str, list[str]]]] = {
    "imagenet": (
        "imagenet_style.py",
        [],
        "--max-seconds",
        {
            "-j 16": ["-j", "16"],
            "--channels-last": ["--channels-last"],
            "--amp bf16": ["--amp", "bf16"],
        },
    ),
    "nanogpt": (
        "nanogpt_style.py",
        ["--compile", "False"],
        "--max_seconds",
        {"--compile True": ["--compile", "True"]},
    ),
    "gpt": (
        "gpt_style.py",
        [],
        "--max-seconds",
        {
            "rung 0": [],
            "--precision bf16": ["--precision", "bf16"],
            "--precision bf16 --compile": ["--precision", "bf16", "--compile"],
            "--precision bf16 --compile --optimizer fused": [
                *("--precision", "bf16", "--compile", "--optimizer", "fused")
            ],
        },
    ),
    "hf": (
        "hf_trainer_style.py",
        [],
        "--max-seconds",
        {"--bf16": ["--bf16"], "--tf32": ["--tf32"], "--bf16 --tf32": ["--bf16", "--tf32"]},
    ),
}


# A fix that compiles spends its first minute compiling (GPT-2 small: ~40-60 s on an H100):
# its run is that much longer, so that as many steps are measured after the warm-up.
FIX_WARMUP_S = {
    "--compile True": 60.0,
    "--precision bf16 --compile": 60.0,
    "--precision bf16 --compile --optimizer fused": 60.0,
}


def phase_rate(phase: dict[str, Any]) -> tuple[float | None, str]:
    if phase.get("samples_per_s"):
        return phase["samples_per_s"], "samples/s"
    if phase.get("steps") and phase.get("measured_s"):
        return phase["steps"] / phase["measured_s"], "steps/s"
    return None, "N/A"


def autopilot_end(summary: dict[str, Any]) -> tuple[float | None, float | None, str]:
    """(start, end) throughput of an autopilot run: the end is its last phase, measured over
    the ``SETTLE_S`` it ran on in the configuration the autopilot left."""
    pilot = summary.get("autopilot") or {}
    phases = summary.get("phases") or []
    last_rate, unit = phase_rate(phases[-1]) if phases else (None, "N/A")
    return pilot.get("start_samples_per_s"), last_rate, unit


def run_script(
    name: str, out: Path, budget_min: float, fix_s: float, deadline: float, pilot_too: bool = True
) -> dict:
    script, own, limit_flag, fixes = SCRIPTS[name]
    path = str(HERE / script)
    result: dict[str, Any] = {"script": f"benchmarks/autopilot/any_script/{script}", "args": own}
    end = None
    if pilot_too:
        end = run_pilot(name, path, own, limit_flag, out, budget_min, result)
    result["fixes"] = {}
    for label, flags in fixes.items():
        if time.monotonic() + fix_s + FIX_WARMUP_S.get(label, 0.0) + 30 > deadline:
            result["fixes"][label] = {"skipped": "out of time in this call"}
            continue
        fixed = run_until_pilot_done(
            [],
            [path, *own, *flags, limit_flag, str(fix_s + FIX_WARMUP_S.get(label, 0.0))],
            out / f"{name}-fix-{re.sub(r'[^a-z0-9]+', '-', label).strip('-')}",
            fix_s + 90 + FIX_WARMUP_S.get(label, 0.0),
        )
        phases = fixed.get("phases") or []
        rate, fix_unit = phase_rate(phases[-1]) if phases else (None, "N/A")
        result["fixes"][label] = {
            "rate": rate,
            "unit": fix_unit,
            "phase": phases[-1] if phases else None,
        }
        print(f"{name} {label}: {rate} {fix_unit}", flush=True)
    rates = [f["rate"] for f in result["fixes"].values() if f.get("rate")]
    best = max(rates) if rates else None
    result["best_fix"] = best
    result["as_fast"] = bool(end and best and end >= climb.WITHIN_NOISE * best)
    print(f"{name}: autopilot end {end} vs best single fix {best}: as fast = {result['as_fast']}")
    return result


def run_pilot(
    name: str,
    path: str,
    own: list[str],
    limit_flag: str,
    out: Path,
    budget_min: float,
    result: dict[str, Any],
) -> float | None:
    """The script under ``--autopilot`` until it is done and ``SETTLE_S`` after; its end."""
    cap = str(60 * budget_min + 90)
    summary = climb.run(
        [path, *own, limit_flag, cap], out, budget_min, SETTLE_S, f"{name}-autopilot"
    )
    start, end, unit = autopilot_end(summary)
    pilot = summary.get("autopilot") or {}
    result["autopilot"] = {
        "start": start, "end": end, "unit": unit, "state": pilot.get("state"),
        "wall_s": round(summary["wall_s"], 1), "trials": pilot.get("trials"),
    }  # fmt: skip
    print(f"{name} autopilot: {start} -> {end} {unit}; {pilot.get('state')}", flush=True)
    return end


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", choices=sorted(SCRIPTS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=2.5, help="autopilot budget, minutes")
    parser.add_argument("--fix-seconds", type=float, default=40.0)
    parser.add_argument("--deadline-s", type=float, default=520.0, help="for this whole call")
    parser.add_argument("--only-fix", action="append", help="run only these fixes (labels)")
    parser.add_argument("--fixes-only", action="store_true", help="no --autopilot run")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only_fix:
        for script in SCRIPTS.values():
            for label in [k for k in script[3] if k not in args.only_fix]:
                del script[3][label]
    deadline = time.monotonic() + args.deadline_s
    results = {}
    for name in args.names:
        try:
            results[name] = run_script(
                name, args.out, args.budget, args.fix_seconds, deadline, not args.fixes_only
            )
        except Exception as error:  # one script's failure leaves the others' results
            results[name] = {"error": repr(error)}
            print(f"{name}: {error!r}", flush=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
