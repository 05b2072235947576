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
#   overhead    hook_overhead on the ~2 ms/step loop and on the demo at rung 8, then
#               hook_cost_parts (each part of the hook stubbed) on the ~2 ms loop
#   tui-cost    sampler_cost with the demo running; TUI vs headless cost, three rounds
#   tui-ab      the TUI's cost against an earlier tree (AB_TREE: a `git archive` of it inside
#               this tree) and nvitop on the demo at rung 4, TUI_ROUNDS (5) alternating rounds
#   tui-gpt     the TUI's cost against nvitop on the GPT step, TUI_ROUNDS (5) alternating rounds
#   screenshot  an SVG of the TUI at rung 4 (docs/tui-rung4.svg)
#   autopilot   the autopilot on the demo from rung 0 (AUTOPILOT_BUDGET minutes, 10)
#   diagnosis   the diagnosis scorecard (DIAGNOSIS_SCENARIOS: names, all when unset)
# The parts whose figures are only history (rungs, threads, ladder, pyspy, ranks, stragglers,
# gpt-ladder, tokens, tokens-ab) went in issue 47: `git show 1ba2e44:benchmarks/gpu.sh`.
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

part_overhead() {
  python3 -m benchmarks.overhead.hook_overhead tiny --blocks 10 --steps 300 \
    --json "$res/overhead_tiny.json" | tail -1
  python3 -m benchmarks.overhead.hook_overhead resnet-rung8 --blocks 6 --steps 40 \
    --json "$res/overhead_rung8.json" 2> "$res/overhead_rung8.err" | tail -1
  python3 -m benchmarks.overhead.hook_cost_parts tiny --rounds "${PARTS_ROUNDS:-6}" --no-profile
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
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 8 --measure 15 \
    --rounds "${TUI_ROUNDS:-5}" --modes tui,nvitop --threads --baseline "$tree" \
    --json "$res/tui_cost_ab.json" -- --workers 8 --pin-memory --batch-size 512 --input uint8 \
    | tee "$res/tui_cost_ab.txt"
}

part_tui_gpt() {
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 8 --measure 15 \
    --rounds "${TUI_ROUNDS:-5}" --modes tui,nvitop --script benchmarks/ranks/gpt_ranks.py \
    --json "$res/tui_cost_gpt.json" -- --seconds 120 | tee "$res/tui_cost_gpt.txt"
}

part_screenshot() {
  python3 -m benchmarks.frontends.tui_cost --size 160x48 --warmup 45 --measure 2 --modes tui \
    --screenshot "$res/shot" -- --workers 8 --pin-memory --batch-size 512 --input uint8
  cp "$res/shot/tui.svg" "$res/tui_rung4.svg"
}

part_autopilot() {
  python3 -m benchmarks.autopilot.climb --out "$res/ap" --budget "${AUTOPILOT_BUDGET:-10}" 2>&1 | tail -30
}

part_diagnosis() {
  local only=(); [ -n "${DIAGNOSIS_SCENARIOS:-}" ] && read -ra only <<< "--only $DIAGNOSIS_SCENARIOS"
  python3 -m benchmarks.diagnosis.scorecard --out "$res/diag" "${only[@]}" 2>&1 | tail -20
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
