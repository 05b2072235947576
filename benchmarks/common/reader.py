"""A monitor's reader of one hooked process, as a ``python -c`` script (argv: PID, seconds):
the hook under a benchmark sends its rows as in real use. It prints the steps it saw."""

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
