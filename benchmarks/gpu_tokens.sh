#!/bin/bash
# Issue 26 (tokens): gputop-train's samples/s, tokens/s and step breakdown against a
# nanoGPT-style loop's own meter on the GPU (benchmarks/tokens_meter.py), then the hook's
# cost side by side with the commit before (hook_overhead.py tiny and gpt; the earlier tree
# in _base/, with the same benchmark script). Results in $OUT.
set -o pipefail
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
} | tee "$OUT/r/machine.txt"
python3 benchmarks/tokens_meter.py --out "$OUT/r" --name nanogpt --seconds 60
python3 benchmarks/tokens_meter.py --out "$OUT/r" --name slowdata --sleep-ms 30 --seconds 40
for run in "_base tiny" ". tiny" ". gpt" "_base gpt"; do
  set -- $run
  tag=$([ "$1" = . ] && echo new || echo base)
  (cd "$1" && PYTHONPATH=/tmp/site:$PWD python3 benchmarks/hook_overhead.py "$2" --blocks 8 \
     --steps 300 --json "$OUT/r/overhead-$2-$tag.json" | tail -1)
done
rm -f "$OUT"/r/*-meter.json
tar -C "$OUT" -czf "$OUT/tokens_gpu.tgz" r && rm -rf "$OUT/r"
