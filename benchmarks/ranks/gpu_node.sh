#!/usr/bin/env bash
# The job's own GPUs on a node of several (docs/gpus.md, issue 37), in one device call:
#   A  side by side, each under its own monitor: the GPT GPU-bound on GPU 0, and input-bound
#      under CUDA_VISIBLE_DEVICES=1
#   B  the GPT on GPU 0 while another process (benchmarks/ranks/gpu_hog.py, no monitor) loads it
#   C  DDP, then FSDP2, of the same GPT on both GPUs (torchrun --nproc-per-node 2)
#   D  the GPT alone under CUDA_VISIBLE_DEVICES=1, GPU 0 idle (the issue's case)
# Beside each: nvidia-smi's per-GPU readings every 0.5 s and its compute apps. Results in
# /tmp/gputop-node/ (headless JSON, recordings, logs), packed into $OUT/node.tar.gz after each
# part (a run cut short still brings back the parts it finished).
#
#     bash benchmarks/ranks/gpu_node.sh              # SECONDS_EACH=35 per job
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gputop-out}
res=/tmp/gputop-node
mkdir -p "$res" "$OUT"
pack() { tar czf "$OUT/node.tar.gz" -C /tmp gputop-node; }
export PYTHONUNBUFFERED=1
S=${SECONDS_EACH:-35}

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader
  echo "cores $(nproc)"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
} > "$res/machine.txt" 2>&1

mon() {  # NAME ARGS...: the job under its own monitor, headless JSON every 2 s, recorded
  local name=$1
  shift
  python3 -m gputop_train --headless --format json --interval 2 \
    --record "$res/$name.rec.jsonl" "$@" > "$res/$name.json" 2> "$res/$name.err"
  echo "$name exit $?"
}

smi_start() {
  nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,power.draw,clocks.sm \
    --format=csv,noheader,nounits -lms 500 > "$res/$1.smi.csv" 2>&1 &
  smi=$!
}

apps() {  # which PID holds which GPU, mid-run
  sleep "$2"
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader \
    > "$res/$1.apps.csv" 2>&1
}

echo "A: side by side $(date -u +%T)"
smi_start A
mon a_gpu0_bound benchmarks/ranks/gpt_ranks.py --seconds "$S" &
a1=$!
CUDA_VISIBLE_DEVICES=1 mon a_cvd1_input benchmarks/ranks/gpt_ranks.py --seconds "$S" --input-ms 60 &
a2=$!
apps A 25
wait "$a1" "$a2"
kill "$smi"
pack

echo "B: shared GPU $(date -u +%T)"
smi_start B
python3 benchmarks/ranks/gpu_hog.py --device 0 --seconds $((S + 25)) --duty 0.5 > "$res/hog.log" 2>&1 &
hog=$!
sleep 3
(apps B 25) &
mon b_shared_gpu0 benchmarks/ranks/gpt_ranks.py --seconds "$S"
kill "$hog"
wait "$hog" 2> /dev/null
kill "$smi"
pack

for mode in ddp fsdp2; do
  echo "C: $mode $(date -u +%T)"
  smi_start "c_$mode"
  (apps "c_$mode" 30) &
  mon "c_$mode" -- torchrun --standalone --nproc-per-node 2 benchmarks/ranks/gpt_ranks.py \
    --mode "$mode" --seconds "$S"
  kill "$smi"
  pack
done

echo "D: CUDA_VISIBLE_DEVICES=1 alone $(date -u +%T)"
smi_start D
(apps D 25) &
CUDA_VISIBLE_DEVICES=1 mon d_cvd1_bound benchmarks/ranks/gpt_ranks.py --seconds "$S"
kill "$smi"
wait
echo "done $(date -u +%T)"
pack
