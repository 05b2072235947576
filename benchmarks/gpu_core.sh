#!/usr/bin/env bash
# The core issue's GPU checks (device tool, H100): an NVML probe and headless demo runs.
#   part "rungs": NVML/GPM probe; the demo at rungs 0 and 8 of the reference table
#   part "overhead": benchmarks/hook_overhead.py on the 2 ms loop and on rung 8
# Results land in $OUT (the device tool brings them back).
set -uo pipefail
part=${1:?rungs or overhead}
source benchmarks/gpu_env.sh
if [ "$part" = rungs ]; then
  python3 - <<'PY' | tee "$OUT/nvml_probe.txt"
import time
from gputop_train.collect.nvml import NvmlSampler
s = NvmlSampler(); print(s.open())
s.sample(); time.sleep(1.1); print(s.sample())
PY
  rung0=(--steps 600)
  rung8=(--workers 4 --pin-memory --batch-size 1024 --input gpu-resize --precision bf16
         --channels-last --compile --steps 1200)
  python3 -m gputop_train --headless --format json demos/resnet.py "${rung0[@]}" \
    > "$OUT/rung0.jsonl" 2> "$OUT/rung0.err"; echo "rung0 exit $?"
  python3 -m gputop_train --headless --format json demos/resnet.py "${rung8[@]}" \
    > "$OUT/rung8.jsonl" 2> "$OUT/rung8.err"; echo "rung8 exit $?"
  python3 benchmarks/steady_state.py "$OUT/rung0.jsonl" "$OUT/rung8.jsonl" | tee "$OUT/steady.txt"
else
  python3 benchmarks/hook_overhead.py tiny --blocks 10 --steps 300 --json "$OUT/overhead_tiny.json" | tail -1
  python3 benchmarks/hook_overhead.py resnet-rung8 --blocks 6 --steps 40 \
    --json "$OUT/overhead_rung8.json" 2> "$OUT/overhead_rung8.err" | tail -1
fi
