"""The suite's timeout is never raised inside pytest's own code (tests/support/timeouts.py)."""

from __future__ import annotations

import sys
from types import FrameType

from tests.support import timeouts
from tests.support.paths import REPO


def _frame_in(filename: str) -> FrameType:
    """A frame of code compiled as if from ``filename``."""
    namespace: dict[str, object] = {"sys": sys}
    exec(compile("def here():\n    return sys._getframe()\n", filename, "exec"), namespace)
    frame = namespace["here"]()
    assert isinstance(frame, FrameType)
    return frame


def test_a_timeout_inside_pytests_traceback_formatting_waits() -> None:
    assert timeouts.in_unsafe_code(_frame_in("/venv/site-packages/_pytest/_code/code.py"))
    assert timeouts.in_unsafe_code(_frame_in("/usr/lib/python3.11/ast.py"))


def test_a_timeout_inside_the_test_is_raised_at_once() -> None:
    assert not timeouts.in_unsafe_code(_frame_in(str(REPO / "tests" / "test_something.py")))
    assert not timeouts.in_unsafe_code(sys._getframe())  # pytest's runner called this test
