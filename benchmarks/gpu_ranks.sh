#!/usr/bin/env bash
# Several ranks on several GPUs (device tool, nvidia-h200-x2), results in $OUT:
#   ranks-status.jsonl, ranks.jsonl (recording): torchrun with one NCCL rank per GPU under
#     gputop-train --headless, no edit to the script;
#   ranks.txt: what the recording shows (ranks hooked, each rank's PID on its GPU);
#   ranks-pane.txt: the TUI's screen (tmux, 160x48) on the same job.
set -uo pipefail
source benchmarks/gpu_env.sh
gpus=$(nvidia-smi --list-gpus | wc -l)
job=(torchrun --standalone --nproc-per-node "$gpus" tests/scenarios/loops.py ddp cuda=1
     width=4096 batch=2048 step_ms=2)
python3 -m gputop_train --headless --format json --interval 2 --record "$OUT/ranks.jsonl" \
  -- "${job[@]}" steps=3000 > "$OUT/ranks-status.jsonl" 2> /tmp/run/ranks.err
echo "headless exit $?"; tail -3 /tmp/run/ranks.err
python3 - "$OUT/ranks.jsonl" <<'PY' | tee "$OUT/ranks.txt"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
hellos = {e["pid"]: e["frame"].get("rank") for e in events if e["kind"] == "hello"}
print("hooked pid -> rank:", hellos)
seen = {}
for e in events:
    if e["kind"] == "gpu":
        for gpu in e["samples"]:
            for proc in gpu["processes"]:
                seen.setdefault(gpu["index"], set()).add(proc["pid"])
print("GPU index -> PIDs with memory on it:", {k: sorted(v) for k, v in seen.items()})
steps = {}
for e in events:
    if e["kind"] == "steps":
        steps[e["pid"]] = steps.get(e["pid"], 0) + len(e["rows"])
print("steps received per pid:", steps)
PY
tail -1 "$OUT/ranks-status.jsonl" | cut -c1-900
tmux new -d -s ranks -x 160 -y 48 "python3 -m gputop_train --no-record -- ${job[*]} steps=100000"
sleep 30
tmux capture-pane -p -t ranks > "$OUT/ranks-pane.txt"
tmux send-keys -t ranks 2 && sleep 2 && tmux capture-pane -p -t ranks >> "$OUT/ranks-pane.txt"
tmux send-keys -t ranks q && sleep 1 && tmux send-keys -t ranks s && sleep 8
tmux kill-server 2>/dev/null || true
pkill -f "tests/scenarios/loops.py ddp" || true
