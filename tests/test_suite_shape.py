"""The suite's own shape (issue 28, point 7): helpers shared by test modules live in
tests/support, so that no test module imports another or the conftest (a test module's
import runs its module-level skips and fixtures where they do not belong); the lanes
(issue 40) read which tests start a process."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.support import lanes
from tests.support.clock import ManualClock
from tests.support.paths import REPO


def test_no_test_module_imports_another_or_the_conftest() -> None:
    offenders = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [
                f"{path.name}: {name}"
                for name in names
                if name.startswith(("tests.test_", "test_")) or name.split(".")[-1] == "conftest"
            ]
    assert offenders == []


def test_the_lanes_read_a_process_start_through_helpers_at_any_depth() -> None:
    # run_hooked asks torch_jobs' server (started with subprocess) to fork the job.
    assert "run_hooked" in lanes.starting_names("tests.support.hooked")
    assert "spawn" in lanes.starting_names("tests.support.torch_jobs")
    assert lanes.starting_names("tests.support.clock") == frozenset()
    assert lanes.starts_a_process("tests.test_suite_shape", "_starts_one", ())
    assert not lanes.starts_a_process("tests.test_suite_shape", "_starts_none", ())


def _starts_one() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _starts_none() -> None:
    _ = ManualClock().advance(1.0)


def test_a_process_started_is_noted_for_the_lane_check() -> None:
    lanes.take_started()
    _starts_one()
    assert [what for what in lanes.take_started() if sys.executable in what]


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    command = readme.split("Run the tests (CPU only", 1)[1].split("```bash\n", 1)[1]
    command = command.split("\n```", 1)[0]
    ci_lines = (REPO / ".ci" / "run").read_text().rstrip("\n").splitlines()
    assert ci_lines[-1] == command
    # The fast lane first; the solo part runs whatever the parallel part's outcome.
    assert "-m fast &&" in command and "|| rest=$?; python3 -m pytest -m solo" in command
