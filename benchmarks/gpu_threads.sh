#!/usr/bin/env bash
# Why the CPU-bound rungs run faster here than the reference table (device tool, H100).
# Records how many CPUs the job sees, then runs the demo headless at rungs 0, 1 and 2 with
# torch's default intra-op threads and with OMP_NUM_THREADS=1, alternating, in one call.
# Results land in $OUT: cpus.txt, threads.txt (steady-state figures), and threads.tgz with
# each run's JSON lines and stderr (the device tool brings back a few files per call).
set -uo pipefail
source benchmarks/gpu_env.sh
{
  echo "nproc $(nproc)"
  python3 -c 'import os, torch; print("affinity", len(os.sched_getaffinity(0)),
"cpu_count", os.cpu_count(), "torch threads", torch.get_num_threads())'
  echo "cgroup cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo n/a)"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz' || true
  python3 -c 'import PIL; print("Pillow", PIL.__version__)'
} | tee "$OUT/cpus.txt"
declare -A rung=(
  [0]="--steps 600"
  [1]="--workers 8 --steps 2000"
  [2]="--workers 8 --pin-memory --steps 2400"
)
for r in 0 1 2; do
  for setting in default one; do
    if [ "$setting" = one ]; then threads=(env OMP_NUM_THREADS=1); else threads=(env); fi
    # shellcheck disable=SC2086
    "${threads[@]}" python3 -m gputop_train --headless --format json --no-record \
      demos/resnet.py ${rung[$r]} > "$OUT/threads-$r-$setting.jsonl" 2> "$OUT/threads-$r-$setting.err"
    echo "rung $r $setting exit $?"
  done
done
python3 benchmarks/steady_state.py "$OUT"/threads-*.jsonl | tee "$OUT/threads.txt"
tar czf "$OUT/threads.tgz" -C "$OUT" $(cd "$OUT" && ls threads-*) && rm -f "$OUT"/threads-*
