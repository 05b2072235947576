"""The autopilot on the demo (or any script with knobs): from its first configuration to where
the advisor stops, with no human input. Prints the trial table and the throughput reached.

    python benchmarks/autopilot.py --out /tmp/ap                       # the demo at rung 0
    python benchmarks/autopilot.py --out /tmp/ap -- benchmarks/scenarios/launch_bound.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monitored import ROOT, run_until_pilot_done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/gputop-autopilot"))
    parser.add_argument("--budget", type=float, default=10.0, help="minutes (--autopilot-budget)")
    parser.add_argument("script", nargs="*", default=[str(ROOT / "demos" / "resnet.py")])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    name = Path(args.script[0]).stem
    options = ["--autopilot", "--autopilot-budget", str(args.budget)]
    summary = run_until_pilot_done(options, args.script, args.out / name, 60 * args.budget + 120)
    (args.out / f"{name}.result.json").write_text(json.dumps(summary, indent=1))
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
    best = max((p for p in summary["phases"] if p["samples_per_s"]), key=lambda p: p["phase"])
    print(f"  last measured phase {best['phase']} ({best['change']}): {best['samples_per_s']:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
