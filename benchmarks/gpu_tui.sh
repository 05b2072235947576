#!/usr/bin/env bash
# The TUI issue's GPU checks (device tool, H100), results in $OUT:
#   part "cost": what the samplers cost per call (benchmarks/sampler_cost.py, with the demo at
#     8 workers running), then the monitor's cost, TUI vs headless in a 160x48 pty, three
#     alternating rounds;
#   part "all": the same, plus an SVG screenshot of the running TUI at rung 4 (workers busy,
#     GPU partly idle) and the hook overhead on the ~2 ms/step loop;
#   part "ab OLD_TREE": the TUI's cost side by side with an earlier version (OLD_TREE: a
#     `git archive` of it inside this tree) and with nvitop at the same refresh, three
#     alternating rounds (this version with --threads: CPU and wake-ups per thread).
set -uo pipefail
part=${1:-all}
source benchmarks/gpu_env.sh
if [ "$part" = ab ]; then
  for round in 1 2 3; do
    (cd "$2" && PYTHONPATH=/tmp/site:$PWD python3 benchmarks/tui_cost.py --size 160x48 \
      --warmup 10 --measure 20 --modes tui -- --workers 8) | tail -1 | sed 's/^/old /'
    python3 benchmarks/tui_cost.py --size 160x48 --warmup 10 --measure 20 --modes tui,nvitop \
      --threads -- --workers 8 | grep -v "median\|tui / nvitop" | sed 's/^/new /'
  done | tee "$OUT/tui_cost_ab.txt"
  exit 0
fi
python3 demos/resnet.py --workers 8 --steps 2500 > /tmp/run/demo.log 2>&1 &
demo=$!
sleep 25
python3 benchmarks/sampler_cost.py --pid "$demo" --json "$OUT/sampler_cost.json"
kill -INT "$demo"; wait "$demo"
python3 benchmarks/tui_cost.py --size 160x48 --warmup 20 --measure 40 --rounds 3 \
  --json "$OUT/tui_cost.json" -- --workers 8
[ "$part" = cost ] && exit 0
python3 benchmarks/tui_cost.py --size 160x48 --warmup 50 --measure 10 --modes tui \
  --screenshot /tmp/shot -- --workers 8 --pin-memory --batch-size 512 --input uint8
cp /tmp/shot/tui.svg "$OUT/tui_rung4.svg"
python3 benchmarks/hook_overhead.py tiny --blocks 20 --steps 500 --json "$OUT/overhead_tiny.json" | tail -1
