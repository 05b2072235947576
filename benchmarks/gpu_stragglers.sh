#!/usr/bin/env bash
# Issue "two GPUs": the DDP demo on every GPU of the box (device tool, nvidia-h200-x2), with
# and without one rank slowed, under gputop-train --headless with --prometheus. In $OUT:
#   ddp-{even,slow}.jsonl: the status lines (per-rank rows in "ranks", findings);
#   ddp-{even,slow}.metrics: a scrape of the endpoint halfway through;
#   ddp-slow-pane.txt: the TUI's screen (tmux, 160x48) on the slowed job.
set -uo pipefail
source benchmarks/gpu_env.sh
gpus=$(nvidia-smi --list-gpus | wc -l)
demo=(torchrun --standalone --nproc-per-node "$gpus" demos/resnet_ddp.py --workers 6
      --pin-memory --batch-size 256 --input uint8 --steps 1500)
for case in even slow; do
  flag=(); [ "$case" = slow ] && flag=(--slow-rank 1 --slow-input-ms 60)
  python3 -m gputop_train --headless --format json --interval 2 --no-record \
    --prometheus 127.0.0.1:9400 -- "${demo[@]}" "${flag[@]}" > "$OUT/ddp-$case.jsonl" \
    2> "/tmp/run/ddp-$case.err" &
  monitor=$!
  sleep 45
  python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9400/metrics").read().decode())' \
    > "$OUT/ddp-$case.metrics"
  wait "$monitor"; echo "$case: exit $?"; tail -2 "/tmp/run/ddp-$case.err"
  tail -1 "$OUT/ddp-$case.jsonl" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
for r in s["ranks"]:
    print(" rank", r["rank"], "pid", r["pid"], "p50", r["step_ms_p50"], "wait", r["data_wait_pct"],
          "samples/s", r["samples_per_s"])
print(" samples/s", s["samples_per_s"], "findings", [f["title"] for f in s["findings"]])'
done
tmux new -d -s ddp -x 160 -y 48 "python3 -m gputop_train --no-record -- ${demo[*]} --slow-rank 1 --slow-input-ms 60"
sleep 40
tmux capture-pane -p -t ddp > "$OUT/ddp-slow-pane.txt"
tmux send-keys -t ddp q && sleep 1 && tmux send-keys -t ddp s && sleep 8
tmux kill-server 2>/dev/null || true
