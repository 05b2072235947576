"""A GPT in fp32 with attention written by hand, declaring no gputop-train knob: demos/gpt.py's
model and loop (rung 0: fp32, softmax(q @ k^T), eager, AdamW foreach=False) without its
``declare_knobs``, so the autopilot has only the hook's built-in knobs (issue 38: it kept
bf16, then stopped at SDPA, an edit, where compile was next). The flags are demos/gpt.py's:
the fixes a user would try by hand, and its own meter every 5 s.

    python gpt_style.py --max-seconds 120                     # rung 0
    python gpt_style.py --precision bf16 --compile            # a combination in its own flags
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository: demos/

from demos.gpt import Trainer, parse_args


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    limit = argparse.ArgumentParser(add_help=False)
    limit.add_argument("--max-seconds", type=float, default=0.0, help="stop after this long")
    known, rest = limit.parse_known_args()
    args, steps = parse_args(rest)
    print(f"gpt_style: {vars(args)}", flush=True)
    trainer = Trainer(args)  # and no trainer.declare_knobs(): the script declares none
    if known.max_seconds:
        signal.signal(signal.SIGALRM, _stop)
        signal.setitimer(signal.ITIMER_REAL, known.max_seconds)
    try:
        trainer.run(steps)
    except KeyboardInterrupt:
        print(f"stopped after {trainer.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
