"""Occasional in-process probes: host-device sync sites, and FLOPs per sample for MFU.

Each probe covers exactly one training step (from its first batch to its optimizer step),
on sampled steps only, so its cost stays off the common path.
"""

from __future__ import annotations

import linecache
import os
import sys
import warnings
from collections import Counter
from typing import Any

# One scanned step early on, then one every this many: warn mode slows every sync while on.
FIRST_SYNC_SCAN_STEP = 50
SYNC_SCAN_EVERY_STEPS = 500
# Count FLOPs once, on this step: after start-up, before most runs would compile.
FLOP_COUNT_STEP = 3
_SYNC_WARNING = "synchroniz"  # "called a synchronizing CUDA operation"
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SyncScanner:
    """Counts synchronizing CUDA ops during one step, with the file:line that called each.

    ``torch.cuda.set_sync_debug_mode("warn")`` makes PyTorch issue a warning at every
    synchronizing op, attributed to the Python caller; we collect those warnings instead of
    printing them, and pass every other warning through untouched.
    """

    def __init__(self, torch_module: Any) -> None:
        self._cuda = torch_module.cuda
        self._torch_dir = os.path.dirname(getattr(torch_module, "__file__", None) or "/nonexistent")
        self.requested = False
        self.active = False
        self._sites: Counter[tuple[str, int]] = Counter()
        self._saved_showwarning: Any = None

    def due(self, step: int) -> bool:
        periodic = step > 0 and step % SYNC_SCAN_EVERY_STEPS == 0
        return self.requested or step == FIRST_SYNC_SCAN_STEP or periodic

    def start(self) -> None:
        self.requested = False
        self.active = True
        self._sites.clear()
        self._saved_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        warnings.filterwarnings("always", message=f".*{_SYNC_WARNING}")
        self._cuda.set_sync_debug_mode("warn")

    def stop(self) -> dict[str, Any]:
        self._cuda.set_sync_debug_mode("default")
        warnings.showwarning = self._saved_showwarning
        self.active = False
        sites = [
            {
                "file": filename,
                "line": lineno,
                "op": linecache.getline(filename, lineno).strip()[:160],
                "count": count,
            }
            for (filename, lineno), count in self._sites.most_common(10)
        ]
        return {"count": sum(self._sites.values()), "sites": sites}

    def _showwarning(
        self,
        message: Any,
        category: Any,
        filename: str,
        lineno: int,
        file: Any = None,
        line: Any = None,
    ) -> None:
        if _SYNC_WARNING not in str(message):
            self._saved_showwarning(message, category, filename, lineno, file, line)
            return
        site = self._user_frame()
        if site is not None:  # None: our own call to set_sync_debug_mode
            self._sites[site] += 1

    def _user_frame(self) -> tuple[str, int] | None:
        """The innermost caller outside torch and the warnings machinery: the user's line
        that made the sync (torch.unique's own file is not where to fix it). None when the
        chain starts in gputop-train itself."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(_OUR_DIR):
                return None
            if not filename.startswith(self._torch_dir) and not filename.endswith("warnings.py"):
                return (filename, frame.f_lineno)
            frame = frame.f_back
        return None


class FlopCounter:
    """FLOPs of one whole step (forward, backward, optimizer) via FlopCounterMode."""

    def __init__(self) -> None:
        self._mode: Any = None
        self.done = False

    def start(self) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self._mode = FlopCounterMode(display=False)
        self._mode.__enter__()

    def stop(self) -> int | None:
        mode, self._mode = self._mode, None
        self.done = True
        if mode is None:
            return None
        mode.__exit__(None, None, None)
        return int(mode.get_total_flops())

    @property
    def active(self) -> bool:
        return self._mode is not None
