#!/usr/bin/env bash
# The autopilot on the demo from rung 0 (device tool), results in $OUT: autopilot.tar.gz
# (the recording, its summary, the monitor's log, the trial table).
set -uo pipefail
source benchmarks/gpu_env.sh
python3 benchmarks/autopilot.py --out /tmp/ap --budget "${1:-10}" 2>&1 | tail -30
tar czf "$OUT/autopilot.tar.gz" -C /tmp ap
