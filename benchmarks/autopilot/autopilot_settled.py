"""The autopilot's settled gains against the script's own meter, in one device call (issue 38).

    python -m benchmarks.autopilot.autopilot_settled --out /tmp/settled --budget 1.75

On the ImageNet-style script with 4 workers (benchmarks/autopilot/any_script/imagenet_style.py,
which prints its own samples/s every 5 s):

1. ``--autopilot``: the climb from the unmodified script; the job runs on ``--tail`` seconds
   after the autopilot is done. The script's own meter before the first change is the start,
   the meter in the tail (past its first 10 s) the end; each kept rung's reported gain and the
   whole climb's are set beside them.
2. ``--try num_workers=16 --try autocast=bf16`` (alone with ``--try-only``): bf16 on the
   input-bound job, after a revert
   whose prefetched batches inflated the baseline before (issue 38: 0.74x); it should read
   within 5% of 1.0x.
3. The plain script at the kept settings, started with them in its own flags: its meter
   against the autopilot's end; then each ``--combo`` (the script's flags for another
   combination of built-in knobs, "-j 16 --amp bf16 --channels-last"), so that the best
   combination measured by hand is taken in the same call.

Each step is skipped when ``--deadline-s`` would not hold it; results.json says which.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common.monitored import run_until_pilot_done
from benchmarks.common.paths import REPO

SCRIPT = REPO / "benchmarks" / "autopilot_any" / "imagenet_style.py"
METER = re.compile(r"meter t=([\d.]+) ([\d.]+) samples/s")
# The script's flags for each built-in knob value the autopilot may keep.
FLAGS = {
    "num_workers": lambda v: ["-j", str(v)],
    "autocast": lambda v: ["--amp", str(v)] if v != "off" else [],
    "channels_last": lambda v: ["--channels-last"] if str(v).lower() == "true" else [],
    "compile": lambda v: ["--compile"] if v != "off" else [],
}
# The tail's first seconds still hold the last change's transient; the meter past them is
# the end (the meter prints every 5 s).
TAIL_SKIP_S = 10.0
# The --try survey: five windows (a baseline, 16 workers, the revert, bf16, the revert), each
# measured on to +-1.5% or 60 s (pilot.TRY_MAX_S) past its transient: up to ~6 min on the H100;
# stopped at this, or at the deadline.
TRY_CAP_S = 420.0


def monitored(options: list[str], script: list[str], stem: Path, tail_s: float, cap_s: float):
    """Run under ``gputop-train --headless --format json``; stop the job ``tail_s`` after the
    pilot is done (or at ``cap_s``). Returns (summary, first change's wall time, done's)."""
    try:
        summary = run_until_pilot_done(options, script, stem, cap_s - tail_s, settle_s=tail_s)
    except RuntimeError:  # no summary: each step's figures then read as missing
        return {}, None, None
    return summary, summary["first_change_t"], summary["done_t"]


def meters(stem: Path) -> list[tuple[float, float]]:
    text = Path(f"{stem}.log").read_text(errors="replace") if Path(f"{stem}.log").exists() else ""
    return [(float(t), float(r)) for t, r in METER.findall(text)]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def kept_flags(end_settings: list[str]) -> list[str]:
    flags: list[str] = []
    for setting in end_settings:
        name, _, value = setting.partition("=")
        if name in FLAGS:
            flags += FLAGS[name](value)
    return flags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=1.75, help="autopilot budget, minutes")
    parser.add_argument("--tail", type=float, default=25.0, help="seconds after it is done")
    parser.add_argument("--plain-s", type=float, default=35.0)
    parser.add_argument("--deadline-s", type=float, default=280.0, help="for this whole call")
    parser.add_argument("--try-only", action="store_true", help="only the --try survey")
    parser.add_argument(
        "--combo", action="append", default=[], help="another plain run's flags (repeatable)"
    )
    parser.add_argument(
        "--script-args", default="", help='more arguments for the script ("-b 4": a CPU smoke test)'
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.deadline_s
    extra = args.script_args.split()
    results: dict[str, Any] = {}

    def save() -> None:
        (args.out / "results.json").write_text(json.dumps(results, indent=1))

    if args.try_only:
        return survey(args, extra, deadline, results, save)
    cap = 60 * args.budget + args.tail + 60
    stem = args.out / "imagenet-autopilot"
    summary, first, done = monitored(
        ["--autopilot", "--autopilot-budget", str(args.budget)],
        [str(SCRIPT), *extra, "--max-seconds", str(cap)],
        stem,
        args.tail,
        cap,
    )
    pilot = summary.get("autopilot") or {}
    readings = meters(stem)
    start = median([r for t, r in readings[1:] if first is None or t < first])
    end = median([r for t, r in readings if done is not None and t > done + TAIL_SKIP_S])
    results["autopilot"] = {
        "meter_start": start,
        "meter_end": end,
        "meter_ratio": end / start if start and end else None,
        "reported_start": pilot.get("start_samples_per_s"),
        "reported_end": pilot.get("end_samples_per_s"),
        "gain_vs_start": pilot.get("gain_vs_start"),
        "state": pilot.get("state"),
        "trials": pilot.get("trials"),
        "edits_left": pilot.get("edits_left"),
        "replay": pilot.get("replay"),
        "end_settings": pilot.get("end_settings"),
        "meters": readings,
        "first_change_t": first,
        "done_t": done,
    }
    print(json.dumps({k: v for k, v in results["autopilot"].items() if k != "meters"}, indent=1))
    save()

    survey(args, extra, deadline, results, save)

    flags = kept_flags(pilot.get("end_settings") or [])
    if flags and time.time() + args.plain_s + 25 < deadline:
        plain, readings = plain_run(
            args.out / "imagenet-plain-kept", [*extra, *flags], args.plain_s
        )
        results["plain_kept"] = {"flags": flags, "meter": plain, "meters": readings}
        if plain and end:
            results["plain_kept"]["autopilot_end_over_plain"] = end / plain
        print(f"plain {' '.join(flags)}: {plain} samples/s; autopilot end {end}", flush=True)
    else:
        results["plain_kept"] = {"skipped": "nothing kept" if not flags else "out of time"}
    save()
    results["combos"] = {}
    for index, combo in enumerate(args.combo):
        if time.time() + args.plain_s + 25 >= deadline:
            results["combos"][combo] = {"skipped": "out of time"}
            continue
        stem = args.out / f"imagenet-plain-combo{index}"
        plain, readings = plain_run(stem, [*extra, *combo.split()], args.plain_s)
        results["combos"][combo] = {"meter": plain, "meters": readings}
        if plain and end:
            results["combos"][combo]["autopilot_end_over_plain"] = end / plain
        print(f"plain {combo}: {plain} samples/s; autopilot end {end}", flush=True)
        save()
    save()
    return 0


def survey(
    args: argparse.Namespace,
    extra: list[str],
    deadline: float,
    results: dict[str, Any],
    save: Callable[[], None],
) -> int:
    """``--try num_workers=16 --try autocast=bf16``: bf16 after a revert, on the input-bound
    job it cannot help."""
    if time.time() + 100 < deadline:
        stem = args.out / "imagenet-try"
        tries = ["--try", "num_workers=16", "--try", "autocast=bf16"]
        cap = min(TRY_CAP_S, deadline - time.time() - 5)
        script = [str(SCRIPT), *extra, "--max-seconds", str(cap + 30)]
        summary, _, _ = monitored(tries, script, stem, 0.0, cap)
        pilot = summary.get("autopilot") or {}
        results["try"] = {"state": pilot.get("state"), "trials": pilot.get("trials")}
        results["try_meters"] = meters(stem)
        for trial in pilot.get("trials") or ():
            print(f"try {trial['change']}: {trial.get('baseline_samples_per_s')} -> "
                  f"{trial.get('samples_per_s')} = {trial.get('gain')} ({trial.get('reason')}; "
                  f"{trial.get('settled')}; baseline {trial.get('baseline_settled')})",
                  flush=True)  # fmt: skip
    else:
        results["try"] = {"skipped": "out of time in this call"}
    save()
    return 0


def plain_run(stem: Path, flags: list[str], seconds: float) -> tuple[float | None, list]:
    """The script alone with ``flags``: the median of its own meter past the workers' start."""
    script = [str(SCRIPT), *flags, "--max-seconds", str(seconds)]
    with Path(f"{stem}.log").open("w") as log:
        subprocess.run(
            [sys.executable, *script],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=seconds + 60,
        )
    readings = meters(stem)
    return median([r for _, r in readings[2:]]), readings


def recompute(recording: Path) -> list[dict[str, Any]]:
    """Each phase of a recording as the pilot's settling reads it (autopilot/settle.py): the
    first settled window of MIN_TRIAL_S and MIN_TRIAL_STEPS, taken a second at a time as its
    ticks take it, and the phase's steps; for a recording of a run before the settling (or of
    a pilot whose arithmetic changed since), what it would have measured on the same steps."""
    from gputop_train.autopilot.pilot import MIN_TRIAL_S, MIN_TRIAL_STEPS
    from gputop_train.autopilot.settle import settle
    from gputop_train.record import reader
    from gputop_train.session.phases import split_warmup
    from gputop_train.session.stats import step_stats

    session = reader.replay_all(reader.read(recording))
    phases = session.snapshot(10.0, with_phases=True).phases
    primary = session.primary_pid()
    steps = [s for s in session.steps() if primary is None or s.pid == primary]
    out = []
    for index, row in enumerate(phases):
        end = phases[index + 1].phase.first_step if index + 1 < len(phases) else None
        own = [s for s in steps if s.step >= row.phase.first_step and (end is None or s.step < end)]
        first, fixed = None, None
        for cut in range(1, len(own) + 1):
            if cut < len(own) and own[cut].t - own[cut - 1].t < 1.0 and cut % 10:
                continue  # about once a second, as the pilot ticks
            # The protocol before the settling: the phase past its warm-up, judged at once it
            # held MIN_TRIAL_STEPS over MIN_TRIAL_S.
            measured = split_warmup(own[:cut])[1]
            span = sum(s.step_ms or 0.0 for s in measured) / 1000.0
            if fixed is None and len(measured) >= MIN_TRIAL_STEPS and span >= MIN_TRIAL_S:
                fixed = step_stats(measured, primary).samples_per_s
            window = settle(own[:cut])
            if window and window.steps >= MIN_TRIAL_STEPS and window.seconds >= MIN_TRIAL_S:
                first = window
                break
        out.append(
            {
                "phase": row.phase.index,
                "change": row.phase.change,
                "phase_samples_per_s": row.samples_per_s,
                "fixed_5s_samples_per_s": fixed,
                "settled_samples_per_s": first.rate if first else None,
                "settled_note": first.note if first else None,
                "t_mid": first.t_mid if first else None,
            }
        )
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--recompute"]:
        print(json.dumps(recompute(Path(sys.argv[2])), indent=1))
        sys.exit(0)
    sys.exit(main())
