#!/usr/bin/env bash
# The GPU benchmarks, one entry point (benchmarks/README.md): run from the repository root on a
# GPU machine, with the wheels the device image lacks (textual, py-spy, ...) in .whl/ beside
# it or in the repository (WHEELS=DIR to name another place).
#
#     bash benchmarks/gpu.sh PART [PART...]
#
# Each part's results go to $OUT/PART-MACHINE-DATE/ (machine: the GPU's name and count; date:
# UTC, to the minute) with machine.txt (date, GPU, driver, cores, Python, torch, commit: COMMIT or
# git's, command) and are packed
# into $OUT/PART-MACHINE-DATE.tar.gz, one file per part (the device tool brings back a few).
#
# Parts (and the environment variables some take):
#   rungs       NVML/GPM probe; the demo headless at rungs 0 and 8; steady-state figures
#   overhead    hook_overhead on the ~2 ms/step loop and on the demo at rung 8
#   ladder      one run of the demo walking the playbook's rungs by --schedule (recorded),
#               and the demo with --sync-loss (sync sites)
#   tui-cost    sampler_cost with the demo running; TUI vs headless cost, three rounds
#   tui-ab      the TUI's cost against an earlier tree (AB_TREE: a `git archive` of it inside
#               this tree) and nvitop, three alternating rounds
#   screenshot  an SVG of the TUI at rung 4 (docs/tui-rung4.svg)
#   pyspy       py-spy's data-wait against the hook's, per rung (pyspy_vs_hook)
#   threads     rungs 0-2 with torch's default intra-op threads and OMP_NUM_THREADS=1
#   autopilot   the autopilot on the demo from rung 0 (AUTOPILOT_BUDGET minutes, 10)
#   diagnosis   the diagnosis scorecard (DIAGNOSIS_SCENARIOS: names, all when unset)
#   ranks       torchrun with one rank per GPU, headless and in the TUI (2+ GPUs)
#   stragglers  the DDP demo on every GPU with and without one slowed rank, with
#               --prometheus (SLOW_MS, 400; 2+ GPUs)
#   gpt-ladder  the GPT demo walking the LLM ladder by --schedule (recorded), then each
#               transformer scenario as written, 25 s each (GPT_LADDER_SCENARIOS: names, or
#               empty for the ladder alone); transformer_report's line per job
#   tokens      tokens_meter: samples/s, tokens/s and the step's parts against a nanoGPT-style
#               loop's own meter (its get_batch as written, and 30 ms slower)
#   tokens-ab   hook_overhead tiny and gpt on this tree and an earlier one (AB_TREE: a `git
#               archive` of it inside this tree; this tree's benchmark script runs in both),
#               old-new-new-old, AB_ROUNDS times (2)
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 2; }

OUT=${OUT:-/tmp/gputop-out}
mkdir -p "$OUT"
wheels=${WHEELS:-}
for candidate in .whl ../.whl; do
  [ -z "$wheels" ] && compgen -G "$candidate/*.whl" > /dev/null && wheels=$candidate
done
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheels"/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)
count=$(printf '%s\n' "$gpus" | grep -c .)
model=$(printf '%s\n' "$gpus" | head -1 | sed -E 's/NVIDIA //; s/ .*//' | tr '[:upper:]' '[:lower:]')
machine=${model:-cpu}$([ "$count" -gt 1 ] && echo "x$count")
stamp=$(date -u +%Y-%m-%dT%Hh%M)

machine_txt() {  # the part's provenance: date, GPUs, cores, versions, commit (COMMIT=REV where
  date -u +%FT%TZ  # the copy has no .git) and command
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "cores $(nproc)"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
  echo "commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "command bash benchmarks/gpu.sh $part"
}

part_rungs() {
  python3 - <<'PY' | tee "$res/nvml_probe.txt"
import time
from gputop_train.collect.nvml import NvmlSampler
s = NvmlSampler(); print(s.open())
s.sample(); time.sleep(1.1); print(s.sample())
PY
  local rung0=(--steps 600)
  local rung8=(--workers 4 --pin-memory --batch-size 1024 --input gpu-resize --precision bf16
               --channels-last --compile --steps 1200)
  python3 -m gputop_train --headless --format json demos/resnet.py "${rung0[@]}" \
    > "$res/rung0.jsonl" 2> "$res/rung0.err"; echo "rung0 exit $?"
  python3 -m gputop_train --headless --format json demos/resnet.py "${rung8[@]}" \
    > "$res/rung8.jsonl" 2> "$res/rung8.err"; echo "rung8 exit $?"
  python3 -m benchmarks.overhead.steady_state "$res/rung0.jsonl" "$res/rung8.jsonl" | tee "$res/steady.txt"
}

part_overhead() {
  python3 -m benchmarks.overhead.hook_overhead tiny --blocks 10 --steps 300 \
    --json "$res/overhead_tiny.json" | tail -1
  python3 -m benchmarks.overhead.hook_overhead resnet-rung8 --blocks 6 --steps 40 \
    --json "$res/overhead_rung8.json" 2> "$res/overhead_rung8.err" | tail -1
}

part_ladder() {
  local ladder="250:num_workers=8,900:pin_memory=true,1750:batch_size=512,1820:input=uint8"
  ladder+=",1930:precision=fp16;batch_size=1024;compile=true"
  ladder+=",1990:num_workers=15;precision=bf16;channels_last=true"
  ladder+=",2060:input=gpu-resize;num_workers=4"
  python3 -m gputop_train --headless --format json --interval 2 --record "$res/ladder.jsonl" \
    --schedule "$ladder" demos/resnet.py --steps 2400 > "$res/ladder.out" 2> "$res/ladder.err"
  echo "ladder exit $?"; grep -iE "revert|error" "$res/ladder.err" | head -3
  python3 -m gputop_train --headless --format json --no-record demos/resnet.py --workers 8 \
    --pin-memory --sync-loss --steps 120 > "$res/sync.out" 2> /dev/null
  python3 - "$res/ladder.out" <<'PY'
import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
for p in last["phases"]:
    print(p["phase"], p["change"][:40], p["steps"], p["samples_per_s"], p["headline"])
PY
}

part_tui_cost() {
  python3 demos/resnet.py --workers 8 --steps 2500 > "$res/demo.log" 2>&1 &
  local demo=$!
  sleep 25  # past the demo's start-up: the samplers measured on a running job
  python3 -m benchmarks.overhead.sampler_cost --pid "$demo" --json "$res/sampler_cost.json"
  kill -INT "$demo"; wait "$demo"
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 20 --measure 40 --rounds 3 \
    --json "$res/tui_cost.json" -- --workers 8
}

part_tui_ab() {
  local tree=${AB_TREE:?tui-ab needs AB_TREE: a git archive of the earlier tree, in this tree}
  # This tree, the earlier one and nvitop round after round, in one run (tui_cost --baseline):
  # it prints the TUI over nvitop and over the earlier tree, per round.
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 10 --measure 20 --rounds 3 \
    --modes tui,nvitop --threads --baseline "$tree" --json "$res/tui_cost_ab.json" \
    -- --workers 8 | tee "$res/tui_cost_ab.txt"
}

part_gpt_ladder() {
  headless() {  # NAME TIMEOUT ARGS...: one monitored job, its summary line reported
    local name=$1 limit=$2; shift 2
    timeout "$limit" python3 -m gputop_train --headless --format json --interval 5 \
      --record "$res/$name.jsonl" "$@" > "$res/$name.out" 2> "$res/$name.err"
    tail -1 "$res/$name.out" | python3 -m benchmarks.diagnosis.transformer_report "$name" "$res/$name.err"
  }
  local ladder="60:precision=bf16,300:attention=sdpa,600:optimizer=fused,900:micro_batch=16"
  ladder+=",1100:checkpointing=true,1300:checkpointing=false;compile=true"
  headless ladder 300 --schedule "$ladder" demos/gpt.py --steps 1900
  local scenarios="nanogpt_eager gpt_manual_attention gpt_fp32 gpt_memory_limit gpt_trainer_sync"
  for s in ${GPT_LADDER_SCENARIOS-$scenarios gpt_tokenizer_loader}; do
    headless "$s" 50 "benchmarks/scenarios/$s.py" --seconds 25
  done
}

part_tokens() {
  python3 -m benchmarks.diagnosis.tokens_meter --out "$res" --name nanogpt --seconds 60
  python3 -m benchmarks.diagnosis.tokens_meter --out "$res" --name slowdata --sleep-ms 30 --seconds 40
  rm -f "$res"/*-meter.json
}

part_tokens_ab() {
  local tree=${AB_TREE:?tokens-ab needs AB_TREE: a git archive of the earlier tree, in this tree}
  # One benchmark, two trees: the script and the reader it starts.
  mkdir -p "$tree/benchmarks/overhead"  # an earlier tree may predate the topic folders
  cp benchmarks/overhead/__init__.py benchmarks/overhead/hook_overhead.py "$tree/benchmarks/overhead/"
  cp benchmarks/common/reader.py "$tree/benchmarks/common/reader.py"
  for round in $(seq "${AB_ROUNDS:-2}"); do
    for workload in tiny gpt; do
      for side in old new new old; do
        local dir=.; [ "$side" = old ] && dir=$tree
        (cd "$dir" && PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.overhead.hook_overhead "$workload" \
          --blocks 8 --steps 300 --json "$res/overhead-$workload-$side-$round.json") \
          | tail -1 | sed "s/^/$side $round /"
      done
    done
  done | tee "$res/overhead_ab.txt"
}

part_screenshot() {
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 45 --measure 2 --modes tui \
    --screenshot "$res/shot" -- --workers 8 --pin-memory --batch-size 512 --input uint8
  cp "$res/shot/tui.svg" "$res/tui_rung4.svg"
}

part_pyspy() {
  local dir=$res/pyspy; mkdir -p "$dir"
  rung() {  # name, demo arguments: hooked under --headless, then unhooked under attach
    local name=$1; shift
    timeout -s INT 70 python3 -m gputop_train --headless --format json --no-record \
      demos/resnet.py "$@" > "$dir/$name-hook.jsonl" 2> "$dir/$name-hook.err"
    python3 demos/resnet.py "$@" > "$dir/$name-job.log" 2>&1 &
    local job=$!
    sleep 10  # past the demo's start-up
    timeout -s INT 60 python3 -m gputop_train attach "$job" --headless --format json \
      --no-record > "$dir/$name-pyspy.jsonl" 2> "$dir/$name-pyspy.err"
    kill -TERM "$job"; wait "$job"  # a background job of a script ignores SIGINT
  }
  rung rung0
  rung rung1 --workers 8
  rung rung4 --workers 8 --pin-memory --batch-size 512 --input uint8
  python3 -m benchmarks.diagnosis.pyspy_vs_hook "$dir" | tee "$res/pyspy_vs_hook.txt"
}

part_threads() {
  {
    echo "nproc $(nproc)"
    python3 -c 'import os, torch; print("affinity", len(os.sched_getaffinity(0)),
"cpu_count", os.cpu_count(), "torch threads", torch.get_num_threads())'
    echo "cgroup cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo n/a)"
    lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz' || true
  } | tee "$res/cpus.txt"
  local -A rung=([0]="--steps 600" [1]="--workers 8 --steps 2000"
                 [2]="--workers 8 --pin-memory --steps 2400")
  for r in 0 1 2; do
    for setting in default one; do
      local threads=(env); [ "$setting" = one ] && threads=(env OMP_NUM_THREADS=1)
      # shellcheck disable=SC2086
      "${threads[@]}" python3 -m gputop_train --headless --format json --no-record \
        demos/resnet.py ${rung[$r]} > "$res/threads-$r-$setting.jsonl" \
        2> "$res/threads-$r-$setting.err"
      echo "rung $r $setting exit $?"
    done
  done
  python3 -m benchmarks.overhead.steady_state "$res"/threads-*.jsonl | tee "$res/threads.txt"
}

part_autopilot() {
  python3 -m benchmarks.autopilot.climb --out "$res/ap" --budget "${AUTOPILOT_BUDGET:-10}" 2>&1 | tail -30
}

part_diagnosis() {
  local only=(); [ -n "${DIAGNOSIS_SCENARIOS:-}" ] && read -ra only <<< "--only $DIAGNOSIS_SCENARIOS"
  python3 -m benchmarks.diagnosis.scorecard --out "$res/diag" "${only[@]}" 2>&1 | tail -20
}

part_ranks() {
  local job=(torchrun --standalone --nproc-per-node "$count" tests/scenarios/loops.py ddp
             cuda=1 width=4096 batch=2048 step_ms=2)
  python3 -m gputop_train --headless --format json --interval 2 --record "$res/ranks.jsonl" \
    -- "${job[@]}" steps=3000 > "$res/ranks-status.jsonl" 2> "$res/ranks.err"
  echo "headless exit $?"; tail -3 "$res/ranks.err"
  python3 - "$res/ranks.jsonl" <<'PY' | tee "$res/ranks.txt"
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
  tmux new -d -s ranks -x 160 -y 48 "python3 -m gputop_train --no-record -- ${job[*]} steps=100000"
  sleep 30  # the TUI on the running ranks
  tmux capture-pane -p -t ranks > "$res/ranks-pane.txt"
  tmux send-keys -t ranks q && sleep 1 && tmux send-keys -t ranks s && sleep 5
  tmux kill-session -t ranks 2>/dev/null || true
}

part_stragglers() {
  # NVLink multicast stays off on the shared multi-GPU hosts (device tool, KINDS.md).
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  local slow_ms=${SLOW_MS:-400}
  nvidia-smi topo -m > "$res/topology.txt" 2>&1
  # Rung 8 of the ladder without compile: the GPU, not the input, sets the pace, so only the
  # slowed rank's input can hold the job back.
  local demo=(torchrun --standalone --nproc-per-node "$count" demos/resnet_ddp.py --workers 6
              --pin-memory --batch-size 512 --input gpu-resize --precision bf16 --channels-last
              --steps 1200)
  for case in even slow; do
    local flag=(); [ "$case" = slow ] && flag=(--slow-rank 1 --slow-input-ms "$slow_ms")
    python3 -m gputop_train --headless --format json --interval 2 --no-record \
      --prometheus 127.0.0.1:9400 -- "${demo[@]}" "${flag[@]}" > "$res/ddp-$case.jsonl" \
      2> "$res/ddp-$case.err" &
    local monitor=$!
    sleep 45  # halfway through: the endpoint and nvidia-smi's process list
    python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9400/metrics").read().decode())' \
      > "$res/ddp-$case.metrics" 2>&1
    { nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader
      nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader; } \
      > "$res/ddp-$case.apps" 2>&1
    wait "$monitor"; echo "$case: exit $?"; tail -3 "$res/ddp-$case.err"
  done
  tmux new -d -s ddp -x 160 -y 48 \
    "python3 -m gputop_train --record $res/ddp-tui.jsonl -- ${demo[*]} --slow-rank 1 --slow-input-ms $slow_ms"
  sleep 45  # the TUI on the slowed job
  tmux capture-pane -p -t ddp > "$res/ddp-tui-overview.txt"
  tmux send-keys -t ddp 2 && sleep 3 && tmux capture-pane -p -t ddp > "$res/ddp-tui-processes.txt"
  tmux send-keys -t ddp q && sleep 1 && tmux send-keys -t ddp s && sleep 10
  tmux kill-session -t ddp 2>/dev/null || true
  python3 -m gputop_train summary "$res/ddp-tui.jsonl" > "$res/ddp-tui.md" 2>&1
}

status=0
for part in "$@"; do
  fn=part_${part//-/_}
  if ! declare -F "$fn" > /dev/null; then
    echo "gpu.sh: no part '$part' (bash benchmarks/gpu.sh lists them)" >&2; status=2; continue
  fi
  name=$part-$machine-$stamp
  res=$OUT/$name; mkdir -p "$res"
  machine_txt > "$res/machine.txt" 2>&1
  echo "== $name"
  "$fn" 2>&1 | tee "$res/log.txt"
  tar czf "$OUT/$name.tar.gz" -C "$OUT" "$name" && rm -rf "${res:?}"
done
exit $status
