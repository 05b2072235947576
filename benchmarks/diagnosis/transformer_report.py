"""One line per monitored job from its headless summary (stdin) and the job's own meter (its
stderr, the file named): headline, throughput, MFU and how it was reached, the workload probes
and what they cost. Used by gpu.sh's gpt-ladder part; prints N/A where a figure is missing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def main() -> int:
    name, err = sys.argv[1], Path(sys.argv[2])
    try:
        summary = json.loads(sys.stdin.read())
    except json.JSONDecodeError:
        print(f"{name}: no summary line; job stderr tail: {err.read_text()[-600:]!r}")
        return 0
    f = summary.get("figures", summary)
    meter = [m for m in re.findall(r"([\d.]+) TFLOP/s", err.read_text()) if m]
    print(
        f"{name}: headline {(summary.get('findings') or [{}])[0].get('id')}; "
        f"{f.get('samples_per_s')} samples/s, {f.get('steps_per_s')} steps/s; "
        f"achieved {f.get('achieved_tflops')} TFLOP/s (own meter, last: "
        f"{meter[-1] if meter else 'N/A'}), MFU {f.get('mfu_pct')}; {json.dumps(f.get('mfu'))}"
    )
    for phase in summary.get("phases") or []:
        print(
            f"  phase {phase['phase']} {phase['change']}: {phase['samples_per_s']} samples/s, "
            f"p50 {phase['step_ms_p50']} ms, warm-up {phase['warmup_s']} s, "
            f"peak mem {phase['peak_mem_bytes']}, tensor {phase['tensor_active_pct']}%, "
            f"headline {phase['headline']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
