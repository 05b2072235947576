#!/usr/bin/env bash
# The diagnosis scorecard on the device machine (device tool), results in $OUT:
#   diagnosis-PART.tar.gz  per scenario: the recording, the monitor's log; diagnosis.json/.md
# Usage: benchmarks/gpu_diagnosis.sh PART SCENARIO...  (the scenarios of benchmarks/diagnosis.py)
set -uo pipefail
part=$1; shift
source benchmarks/gpu_env.sh
python3 benchmarks/diagnosis.py --out /tmp/diag --only "$@" 2>&1 | tail -20
tar czf "$OUT/diagnosis-$part.tar.gz" -C /tmp diag
