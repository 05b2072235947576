# Sourced by the benchmarks/gpu_*.sh scripts on the device machine: install the carried
# wheels (.whl/, from ../shared/gpu/wheels.sh), set the paths, and note the machine in $OUT.
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT" /tmp/run
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
} | tee -a "$OUT/machine.txt"
