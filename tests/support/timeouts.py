"""pytest-timeout's signal method, made safe for a busy runner (issue 46).

The signal method raises the timeout's failure wherever the test's main thread is: inside
pytest's own traceback formatting (``ast.parse`` of a test's source) on Python 3.11 that left
the AST constructor's depth unbalanced, and the xdist worker died of ``SystemError: AST
constructor recursion depth mismatch`` with every failure's name unsaid (CPython gh-106905).
Here the failure is never raised inside pytest's own code or an AST parse: it is tried again
a moment later. And a test that the signal cannot end (stuck in C code, or deferring for
ever) is ended by the thread method after ``BACKSTOP_S`` more: its worker exits, and xdist
names the test it was running ("worker 'gw1' crashed while running ...").
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import pytest_timeout  # type: ignore[import-untyped]

from .paths import REPO

# A timeout that lands in pytest's own code is tried again this much later: formatting a
# traceback takes well under a second on the 2-core box, even loaded.
RETRY_S = 0.5
# How long after its timeout a test that the signal did not end is ended by the thread method
# (the worker exits; its test is named as crashed).
BACKSTOP_S = 60.0
_UNSAFE_FOLDERS = (f"{Path('_pytest')}/", f"{Path('pluggy')}/")
_UNSAFE_FILES = (str(Path("ast.py")),)
_OURS = tuple(str(REPO / folder) + "/" for folder in ("tests", "gputop_train", "benchmarks"))


def in_unsafe_code(frame: FrameType | None) -> bool:
    """Whether the interrupted stack is in pytest's, pluggy's or the ``ast`` module's code
    called by no code of this checkout (a test calls pytest too): an exception raised there
    breaks pytest itself, not the test."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_OURS):
            return False
        if any(part in filename for part in _UNSAFE_FOLDERS) or filename.endswith(_UNSAFE_FILES):
            return True
        frame = frame.f_back
    return False


def set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """``pytest_timeout_set_timer`` for the signal method in the main thread; None leaves
    any other case to pytest-timeout."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True
        if in_unsafe_code(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
        pytest_timeout.timeout_sigalrm(item, settings)

    backstop = threading.Timer(
        settings.timeout + BACKSTOP_S, pytest_timeout.timeout_timer, (item, settings)
    )
    backstop.daemon = True

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        backstop.cancel()

    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's own slot
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    backstop.start()
    return True
