"""Run ``python -m gputop_train ARGS`` with each Python thread's name given to its OS thread,
so that ``/proc/PID/task/*/comm`` tells the monitor's threads apart (``tui_cost.py
--threads``: which thread costs what). Benchmark-only: Python 3.11 leaves every thread named
after the program.

    python benchmarks/overhead/named_threads.py ARGS...   # as python -m gputop_train ARGS...
"""

from __future__ import annotations

import ctypes
import runpy
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's package
_PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)
_bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


def _named_bootstrap(self: threading.Thread) -> None:
    # The kernel keeps 15 bytes: the package's prefix is dropped so the rest fits.
    name = self.name.removeprefix("gputop-train-")[:15].encode()
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    _bootstrap(self)


threading.Thread._bootstrap_inner = _named_bootstrap  # type: ignore[attr-defined]
sys.argv = ["gputop-train", *sys.argv[1:]]
runpy.run_module("gputop_train", run_name="__main__", alter_sys=True)
