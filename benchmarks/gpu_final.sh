#!/usr/bin/env bash
# The last H100 batch (device tool), results in $OUT:
#   ladder.jsonl/.out  one process walking rungs 0,1,2,3,4,6,7,8 by --schedule (recorded)
#   sync.out           the demo with --sync-loss: sync sites
#   tui_cost.json      monitor CPU and terminal bytes, TUI vs headless, 160x48, 8 workers
#   tui_rung4.svg      the TUI at rung 4
#   overhead_tiny.json hook overhead on the ~2 ms/step loop
set -uo pipefail
source benchmarks/gpu_env.sh
ladder="250:num_workers=8,900:pin_memory=true,1750:batch_size=512,1820:input=uint8"
ladder+=",1930:precision=fp16;batch_size=1024;compile=true"
ladder+=",1990:num_workers=15;precision=bf16;channels_last=true"
ladder+=",2060:input=gpu-resize;num_workers=4"
python3 -m gputop_train --headless --format json --interval 2 --record /tmp/run/ladder.jsonl \
  --schedule "$ladder" demos/resnet.py --steps 2400 > "$OUT/ladder.out" 2> /tmp/run/ladder.err
echo "ladder exit $?"; grep -iE "revert|error" /tmp/run/ladder.err | head -3
cp /tmp/run/ladder.jsonl "$OUT/"
python3 -m gputop_train --headless --format json --no-record demos/resnet.py --workers 8 \
  --pin-memory --sync-loss --steps 120 > "$OUT/sync.out" 2> /dev/null
python3 benchmarks/hook_overhead.py tiny --blocks 16 --steps 400 --json "$OUT/overhead_tiny.json" | tail -1
python3 benchmarks/tui_cost.py --size 160x48 --warmup 20 --measure 40 --json "$OUT/tui_cost.json" \
  -- --workers 8
python3 benchmarks/tui_cost.py --size 160x48 --warmup 40 --measure 5 --modes tui \
  --screenshot /tmp/shot -- --workers 8 --pin-memory --batch-size 512 --input uint8
cp /tmp/shot/tui.svg "$OUT/tui_rung4.svg"
python3 - "$OUT/ladder.out" <<'PY'
import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
for p in last["phases"]:
    print(p["phase"], p["change"][:40], p["steps"], p["samples_per_s"], p["headline"])
PY
