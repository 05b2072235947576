#!/usr/bin/env bash
# The TUI issue's GPU checks (device tool, H100), results in $OUT:
#   the monitor's cost (TUI vs headless, 160x48 pty) with the demo at 8 workers;
#   an SVG screenshot of the running TUI at rung 4 (workers busy, GPU partly idle);
#   and the hook overhead on the ~2 ms/step loop.
set -uo pipefail
source benchmarks/gpu_env.sh
python3 benchmarks/tui_cost.py --size 160x48 --warmup 30 --measure 60 --json "$OUT/tui_cost.json" \
  -- --workers 8
python3 benchmarks/tui_cost.py --size 160x48 --warmup 50 --measure 10 --modes tui \
  --screenshot /tmp/shot -- --workers 8 --pin-memory --batch-size 512 --input uint8
cp /tmp/shot/tui.svg "$OUT/tui_rung4.svg"
python3 benchmarks/hook_overhead.py tiny --blocks 20 --steps 500 --json "$OUT/overhead_tiny.json" | tail -1
