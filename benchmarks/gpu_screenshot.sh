#!/usr/bin/env bash
# An SVG screenshot of the running TUI at rung 4 (device tool, H100), into $OUT.
set -uo pipefail
source benchmarks/gpu_env.sh
python3 benchmarks/tui_cost.py --size 160x48 --warmup 45 --measure 2 --modes tui \
  --screenshot /tmp/shot -- --workers 8 --pin-memory --batch-size 512 --input uint8
cp /tmp/shot/tui.svg "$OUT/tui_rung4.svg"; date -u +%FT%TZ
