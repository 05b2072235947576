#!/usr/bin/env bash
# An SVG screenshot of the running TUI at rung 4 (device tool, H100), into $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
python3 benchmarks/tui_cost.py --size 160x48 --warmup 45 --measure 2 --modes tui \
  --screenshot /tmp/shot -- --workers 8 --pin-memory --batch-size 512 --input uint8
cp /tmp/shot/tui.svg "$OUT/tui_rung4.svg"; date -u +%FT%TZ
