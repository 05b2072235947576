"""Whether a job that ended was stopped by a signal someone sent it, read from how it ended.

A stop is not a crash: torchrun exits 1 after SIGINT or SIGTERM (its agent raises
``SignalException`` after passing the signal to its ranks), so an exit status alone read a
user's Ctrl+C, or a scheduler's SIGTERM, as a crash (issue 45: 10 of 28 stopped runs, and the
cluster's Crashed alert fired for an hour). The monitor's own stops are told to the session
(``events.StopAsked``); this reads the ones it only saw: a signal sent to the job directly.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence

# The shell's convention for a process that ended on signal N: exit status 128 + N.
_SHELL_SIGNAL_BASE = 128
_STOPS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
# torchrun's agent, in its last lines: "SignalException: Process 21377 got signal: 2" (torch
# 2.x), and "Received 2 death signal" / "Received Signals.SIGINT death signal" before it.
_TORCHRUN = re.compile(r"got signal: (\d+)|Received (?:Signals\.)?(\w+) death signal")


def stop_seen(exit_code: int | None, stderr_tail: Sequence[str]) -> str | None:
    """The signal that stopped the job ("SIGINT (seen)"), or None for an exit of its own."""
    if exit_code in (None, 0):
        return None
    assert exit_code is not None
    for number in (-exit_code, exit_code - _SHELL_SIGNAL_BASE):
        if number in _STOPS:
            return f"{_STOPS[signal.Signals(number)]} (seen)"
    last = next((line.strip() for line in reversed(stderr_tail) if line.strip()), "")
    if last == "KeyboardInterrupt" or last.endswith("]: KeyboardInterrupt"):
        # Python's last word on a SIGINT, with exit status 1: in the script, or in its start-up
        # ("Fatal Python error: init_import_site" while the hook's sitecustomize loads:
        # issue 46), and "[rank0]: KeyboardInterrupt" of a torchrun rank.
        return "SIGINT (seen)"
    for line in reversed(stderr_tail):
        match = _TORCHRUN.search(line)
        if match is None:
            continue
        name = match.group(1) or match.group(2)
        seen = int(name) if name.isdigit() else getattr(signal, name, None)
        if seen in _STOPS:
            return f"{_STOPS[signal.Signals(seen)]} (seen by torchrun)"
    return None
