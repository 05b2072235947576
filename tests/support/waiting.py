"""Wait on a condition, never for a fixed time: a loaded machine only makes it take longer."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object], timeout_s: float = 30.0, what: str = "", every_s: float = 0.02
) -> None:
    """Poll ``condition`` every ``every_s`` until it is true; fail, naming ``what``, after
    ``timeout_s``. A condition may itself fail the wait early (``assert job.poll() is None``)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not reached in {timeout_s:g} s: {what or condition}"
        time.sleep(every_s)
