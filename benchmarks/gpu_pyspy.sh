#!/usr/bin/env bash
# py-spy's data-wait against the hook's, per rung (device tool, H100), into $OUT/pyspy.tar.gz:
# the demo runs hooked under `gputop-train --headless` (the hook's data-wait, % of step time),
# then unhooked with `gputop-train attach --headless` on it (% of the training thread's
# py-spy samples). Compare with: python benchmarks/pyspy_vs_hook.py DIR
set -uo pipefail
source benchmarks/gpu_env.sh
mkdir -p /tmp/pyspy
rung() {  # name, demo arguments
  name=$1; shift
  timeout -s INT 70 python3 -m gputop_train --headless --format json --no-record \
    demos/resnet.py "$@" > "/tmp/pyspy/$name-hook.jsonl" 2> "/tmp/pyspy/$name-hook.err"
  python3 demos/resnet.py "$@" > "/tmp/pyspy/$name-job.log" 2>&1 &
  job=$!
  sleep 10
  timeout -s INT 60 python3 -m gputop_train attach "$job" --headless --format json \
    --no-record > "/tmp/pyspy/$name-pyspy.jsonl" 2> "/tmp/pyspy/$name-pyspy.err"
  kill -TERM "$job"; wait "$job"  # a background job of a script ignores SIGINT
}
rung rung0
rung rung1 --workers 8
rung rung4 --workers 8 --pin-memory --batch-size 512 --input uint8
tar -czf "$OUT/pyspy.tar.gz" -C /tmp pyspy
python3 benchmarks/pyspy_vs_hook.py /tmp/pyspy
