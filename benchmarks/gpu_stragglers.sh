#!/usr/bin/env bash
# Issue "two GPUs": the DDP demo on every GPU of the box (device tool, nvidia-h200-x2), with
# and without one rank slowed, under gputop-train --headless with --prometheus, then the TUI.
# Everything lands in $OUT/ddp.tar.gz (the device tool returns at most 8 files):
#   ddp-{even,slow}.jsonl    the status lines (per-rank rows in "ranks", findings) and summary;
#   ddp-{even,slow}.metrics  a scrape of the Prometheus endpoint halfway through;
#   ddp-{even,slow}.apps     nvidia-smi's own list of compute processes (PID, GPU) meanwhile;
#   ddp-tui-{overview,processes}.txt  the TUI's screens (tmux, 160x48) on the slowed job;
#   ddp-tui.md               the Markdown summary of the TUI session's recording.
#     bash benchmarks/gpu_stragglers.sh [SLOW_INPUT_MS]
set -uo pipefail
source benchmarks/gpu_env.sh
# NVLink multicast stays off on the shared multi-GPU hosts (device tool, KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
slow_ms=${1:-400}
res=/tmp/run/ddp; mkdir -p "$res"
gpus=$(nvidia-smi --list-gpus | wc -l)
nvidia-smi topo -m > "$res/topology.txt" 2>&1
# Rung 8 of the ladder without compile (docs/benchmarks.md): the GPU, not the input, sets the
# pace, so only the slowed rank's input can hold the job back.
demo=(torchrun --standalone --nproc-per-node "$gpus" demos/resnet_ddp.py --workers 6
      --pin-memory --batch-size 512 --input gpu-resize --precision bf16 --channels-last
      --steps 1200)
scrape() {  # the endpoint and nvidia-smi's process list, halfway through
  python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9400/metrics").read().decode())' \
    > "$res/ddp-$1.metrics" 2>&1
  { nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader
    nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader; } \
    > "$res/ddp-$1.apps" 2>&1
}
for case in even slow; do
  flag=(); [ "$case" = slow ] && flag=(--slow-rank 1 --slow-input-ms "$slow_ms")
  python3 -m gputop_train --headless --format json --interval 2 --no-record \
    --prometheus 127.0.0.1:9400 -- "${demo[@]}" "${flag[@]}" > "$res/ddp-$case.jsonl" \
    2> "$res/ddp-$case.err" &
  monitor=$!
  sleep 45; scrape "$case"
  wait "$monitor"; echo "$case: exit $?"; tail -3 "$res/ddp-$case.err"
  tail -1 "$res/ddp-$case.jsonl" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
for r in s["ranks"]:
    print(" rank", r["rank"], "pid", r["pid"], "gpus", r.get("gpus"), "p50", r["step_ms_p50"],
          "wait", r["data_wait_pct"], "samples/s", r["samples_per_s"])
print(" samples/s", s["samples_per_s"], "findings", [f["title"] for f in s["findings"]])'
  grep -c 'rank="[01]"' "$res/ddp-$case.metrics" | sed "s/^/ $case metrics lines with a rank label: /"
  sed 's/^/ apps: /' "$res/ddp-$case.apps"
done
tmux new -d -s ddp -x 160 -y 48 "python3 -m gputop_train --record $res/ddp-tui.jsonl -- ${demo[*]} --slow-rank 1 --slow-input-ms $slow_ms"
sleep 45
tmux capture-pane -p -t ddp > "$res/ddp-tui-overview.txt"
tmux send-keys -t ddp 2 && sleep 3 && tmux capture-pane -p -t ddp > "$res/ddp-tui-processes.txt"
tmux send-keys -t ddp q && sleep 1 && tmux send-keys -t ddp s && sleep 10
tmux kill-server 2>/dev/null || true
python3 -m gputop_train summary "$res/ddp-tui.jsonl" > "$res/ddp-tui.md" 2>&1
cat "$res/ddp-tui-overview.txt"
tar czf "$OUT/ddp.tar.gz" -C /tmp/run ddp
