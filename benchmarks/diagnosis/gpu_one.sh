#!/usr/bin/env bash
# Issue 49 on a one-GPU machine, in one device call each part:
#   bash benchmarks/diagnosis/gpu_one.sh headlines   # the two cases of docs/gpus.md alone on one GPU
#                                          # (GPT GPU-bound; the same with 60 ms of input),
#                                          # then the HF Trainer script under the monitor and
#                                          # its headline's knob tried (--try autocast=bf16)
#   bash benchmarks/diagnosis/gpu_one.sh hf-pilot    # the autopilot on the HF script, then each fix by
#                                          # hand in the script's own flags (autopilot_any/run.py)
# Beside each monitored job: nvidia-smi every 0.5 s. Results under /tmp/gputop-one, packed into
# $OUT/one-<part>.tar.gz after each step (a run cut short brings back what it finished).
# COMMIT (the tree's commit, given by the caller: the device copy has no .git) is written
# into machine.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
part=${1:?headlines or hf-pilot}
OUT=${OUT:-/tmp/gputop-out}
res=/tmp/gputop-one/$part
mkdir -p "$res" "$OUT"
pack() { tar czf "$OUT/one-$part.tar.gz" -C /tmp/gputop-one "$part"; }
export PYTHONUNBUFFERED=1
S=${SECONDS_EACH:-35}

{
  echo "commit ${COMMIT:-unknown}"
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader
  echo "cores $(nproc)"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
  python3 -c 'import transformers; print("transformers", transformers.__version__)'
} > "$res/machine.txt" 2>&1

mon() {  # NAME ARGS...: the job under its own monitor, headless JSON every 2 s, recorded
  local name=$1
  shift
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw,clocks.sm \
    --format=csv,noheader,nounits -lms 500 > "$res/$name.smi.csv" 2>&1 &
  local smi=$!
  python3 -m gputop_train --headless --format json --interval 2 \
    --record "$res/$name.rec.jsonl" "$@" > "$res/$name.json" 2> "$res/$name.err"
  echo "$name exit $? $(date -u +%T)"
  kill "$smi"
  pack
}

case $part in
  headlines)
    mon gpu_bound benchmarks/ranks/gpt_ranks.py --seconds "$S"
    mon input_bound benchmarks/ranks/gpt_ranks.py --seconds "$S" --input-ms 60
    mon hf_plain benchmarks/autopilot/any_script/hf_trainer_style.py --max-seconds 75
    python3 - "$res" <<'EOF'
import sys
from pathlib import Path
from benchmarks.common.monitored import run_until_pilot_done
out = Path(sys.argv[1])
summary = run_until_pilot_done(
    ["--try", "autocast=bf16"],
    ["benchmarks/autopilot/any_script/hf_trainer_style.py", "--max-seconds", "260"],
    out / "hf_try_bf16", 250,
)
print("try:", summary.get("autopilot") or summary.get("try"))
EOF
    pack
    ;;
  hf-pilot)
    python3 -m benchmarks.autopilot.any_script.run --out "$res" --budget 2 --fix-seconds 30 \
      --deadline-s "${DEADLINE_S:-540}" hf 2>&1 | tee "$res/run.log"
    pack
    ;;
esac
