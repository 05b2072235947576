"""The suite's own shape (issue 28, point 7): helpers shared by test modules live in
tests/support, so that no test module imports another or the conftest (a test module's
import runs its module-level skips and fixtures where they do not belong)."""

from __future__ import annotations

import ast

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
