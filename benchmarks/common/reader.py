"""A monitor's reader of one hooked process, as a ``python -c`` script (argv: PID, seconds):
the hook under a benchmark sends its rows as in real use. It prints the steps it saw."""

from __future__ import annotations

import os
import subprocess
import sys

READER = """
import sys, time
from gputop_train.monitor.hook_client import HookClient
from gputop_train.session.model import Session
session = Session()
client = HookClient(session, lambda: {int(sys.argv[1])})
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    client.poll(0.1)
print(session.snapshot().total_steps)
"""


def start_reader(pid: int, seconds: float, pythonpath: str | None = None) -> subprocess.Popen:
    """READER on ``pid`` for ``seconds``, importing gputop_train from ``pythonpath`` (this
    process's path unless given: a benchmark that runs another checkout passes its own)."""
    path = pythonpath if pythonpath is not None else os.pathsep.join(sys.path)
    return subprocess.Popen(
        [sys.executable, "-c", READER, str(pid), str(seconds)],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path},
    )
