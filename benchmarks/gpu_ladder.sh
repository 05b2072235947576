#!/usr/bin/env bash
# The ladder on the H100 (device tool), results in $OUT:
#   sync.out/.err    the demo at rung 2 with --sync-loss (headless JSON): sync sites
#   ladder.jsonl     the recording of one process walking rungs 0,1,2,3,4,6,7,8 by --schedule
#   ladder.out/.err  its headless JSON lines (with the phase table in the last one) and job log
set -uo pipefail
source benchmarks/gpu_env.sh
python3 -m gputop_train --headless --format json --record /tmp/run/sync.jsonl demos/resnet.py \
  --workers 8 --pin-memory --sync-loss --steps 300 > "$OUT/sync.out" 2> /tmp/run/sync.err
tail -c 20000 /tmp/run/sync.err > "$OUT/sync.err"
ladder="250:num_workers=8"                                   # rung 1
ladder+=",900:pin_memory=true"                               # rung 2
ladder+=",1750:batch_size=512"                               # rung 3
ladder+=",1820:input=uint8"                                  # rung 4
ladder+=",1930:precision=fp16;batch_size=1024;compile=true"  # rung 6 (5 + compile)
ladder+=",1990:num_workers=15;precision=bf16;channels_last=true"  # rung 7
ladder+=",2060:input=gpu-resize;num_workers=4"               # rung 8
python3 -m gputop_train --headless --format json --interval 2 --record /tmp/run/ladder.jsonl \
  --schedule "$ladder" demos/resnet.py --steps 2330 > "$OUT/ladder.out" 2> /tmp/run/ladder.err
echo "ladder exit $?"
cp /tmp/run/ladder.jsonl "$OUT/"
tail -c 20000 /tmp/run/ladder.err > "$OUT/ladder.err"
python3 - "$OUT/ladder.out" <<'PY'
import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
for p in last["phases"]:
    print(p["phase"], p["change"][:40], p["steps"], p["samples_per_s"], p["data_wait_pct"],
          p["gpu_util_pct"], p["tensor_active_pct"], p["headline"])
PY
python3 -c "import json; o=[json.loads(l) for l in open('$OUT/sync.out')]; \
print([f['evidence'] for f in o[-1]['findings'] if f['id']=='syncs'])"
