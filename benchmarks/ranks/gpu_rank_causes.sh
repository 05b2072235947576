#!/usr/bin/env bash
# Issue 37's rank-side checks on a 2-GPU node (NCCL, torchrun --nproc-per-node 2), results in
# $OUT/ranks.tgz (docs/ranks.md "On two GPUs"): a rank slowed in its GPU compute, in its
# DataLoader and in a loader-less get_batch, and none slowed, each under gputop-train
# --headless; the hook's cost on DDP at a ~20 ms step, plain and monitored alternated; Ctrl+C
# on an FSDP2 job (as it is, and with a rank that heeds no signal). Each part has its own
# time limit and the archive is rewritten after each, so a cut-off call still brings back
# what ran. From the repository root:
#     OUT=/tmp/out bash benchmarks/ranks/gpu_rank_causes.sh
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/ranks
mkdir -p "$R"
pack() { tar -czf "$OUT/ranks.tgz" -C "$OUT" ranks; }
{ nvidia-smi -L; date -u; python3 -c "import torch, pynvml, psutil, prometheus_client; \
print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$R/machine.txt" 2>&1
S=tests/scenarios/collectives.py
TR=(python3 -m torch.distributed.run --standalone --nproc-per-node 2)
case_run() {
  local name=$1; shift
  local t0=$SECONDS
  timeout 60 python3 -m gputop_train --headless --format json --interval 2 \
    --record "$R/$name.jsonl" -- "${TR[@]}" $S ddp device=cuda width=1024 batch=64 \
    steps=250 step_ms=20 "$@" > "$R/$name.json" 2> "$R/$name.err"
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$R/log.txt"
}
case_run unslowed
case_run gpu slow_rank=1 slow_step_ms=30
case_run loader slow_rank=1 slow_data_ms=30
case_run getbatch slow_rank=1 slow_data_ms=30 loader=none
pack
t0=$SECONDS
timeout 200 python3 -m benchmarks.overhead.nccl_hook_cost --rounds 4 --steps 250 \
  --json "$R/hook_cost.json" > "$R/hook_cost.txt" 2>&1
echo "hook_cost: exit $? in $((SECONDS - t0)) s" | tee -a "$R/log.txt"
pack
for hang in "" "slow_rank=1 hang_on_sigint=1"; do
  name=stop_fsdp${hang:+_hung}
  t0=$SECONDS
  timeout 60 python3 -m benchmarks.ranks.stop_hung --scenario fsdp --after-steps 20 \
    --json "$R/$name.json" device=cuda width=1024 batch=64 step_ms=20 $hang \
    > "$R/$name.out" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$R/log.txt"
  pack
done
ps -eo pid,stat,cmd | grep -c "[c]ollectives.py" | sed 's/^/collectives.py processes left at the end: /' \
  | tee -a "$R/log.txt"
pack
