#!/usr/bin/env bash
# The transformer work of issue 26 on the device machine (device tool), results in $OUT:
#   bash benchmarks/gpu_transformers.sh probe   # the GPT demo's ladder + each scenario as written
#   bash benchmarks/gpu_transformers.sh score   # the diagnosis scorecard of the transformer corpus
# Each run: the recording and summary line per job, the jobs' own meters (their stderr).
set -uo pipefail
mode=$1; shift
source benchmarks/gpu_env.sh
run=/tmp/run/$mode; mkdir -p "$run"
headless() {  # NAME TIMEOUT ARGS...: one monitored job, its summary line kept
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m gputop_train --headless --format json --interval 5 \
    --record "$run/$name.jsonl" "$@" >"$run/$name.out" 2>"$run/$name.err"
  tail -1 "$run/$name.out" | python3 benchmarks/transformer_report.py "$name" "$run/$name.err" \
    | tee -a "$run/report.txt"
  tar czf "$OUT/transformers-$mode.tar.gz" -C /tmp/run "$mode"  # kept if a later job overruns
}
if [ "$mode" = probe ]; then
  headless ladder 230 --schedule \
    "60:precision=bf16,300:attention=sdpa,600:optimizer=fused,900:micro_batch=16,1100:checkpointing=true,1300:checkpointing=false;compile=true" \
    demos/gpt.py --steps 1900
  for s in nanogpt_eager gpt_manual_attention gpt_fp32 gpt_memory_limit gpt_trainer_sync gpt_tokenizer_loader; do
    headless "$s" 50 "benchmarks/scenarios/$s.py" --seconds 25
  done
else  # the scorecard, then (time left) nanogpt_eager without gputop-train: its own meter bare
  started=$(date +%s)
  timeout "${SCORE_TIMEOUT:-455}" python3 benchmarks/diagnosis.py --out "$run/diag" --only "$@" \
    2>&1 | tee "$run/diagnosis.log" | grep -v '^{' | tail -30
  left=$((505 - $(date +%s) + started))
  if [ "$left" -gt 40 ]; then
    timeout "$left" python3 benchmarks/scenarios/nanogpt_eager.py --seconds $((left - 20)) \
      >"$run/nanogpt_bare.log" 2>&1
    tail -3 "$run/nanogpt_bare.log"
  fi
fi
tar czf "$OUT/transformers-$mode.tar.gz" -C /tmp/run "$mode"
