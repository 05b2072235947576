"""The suite's timeout is never raised inside pytest's own code (tests/support/timeouts.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
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


def test_a_test_the_alarm_cannot_end_is_named_and_the_others_still_are(tmp_path: Path) -> None:
    """The backstop ends a test stuck where the alarm cannot reach it; xdist then names it as
    crashed, and the other workers' failures keep their names (issue 46)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 1\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.support import timeouts\n"
        "timeouts.BACKSTOP_S = 1.0\n"
        "def pytest_timeout_set_timer(item, settings):\n"
        "    return timeouts.set_timer(item, settings)\n"
    )
    (tmp_path / "test_inner.py").write_text(
        "import signal, time\n"
        "def test_stuck_with_the_alarm_blocked():\n"
        "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "    time.sleep(30)\n"
        "def test_plainly_failing():\n"
        "    assert 1 == 2\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-q",
         "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "crashed while running 'test_inner.py::test_stuck_with_the_alarm_blocked'" in said, said
    assert "FAILED test_inner.py::test_plainly_failing" in said, said
