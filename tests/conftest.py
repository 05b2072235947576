"""Fixtures for every test (helpers shared by test modules are in tests/support/)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# A suite started in the background of a non-interactive shell (`bash .ci/run &`) inherits
# SIGINT as ignored, and so would every monitor and job it starts: the Ctrl+C tests then
# fail and leave their "forever" jobs running. A handler, unlike "ignored", is not inherited.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The hundreds of monitors and jobs the suite starts each import this checkout's package; with
# PYTHONDONTWRITEBYTECODE set (as some sandboxes and CI images do) each compiled it from source
# again: 0.25 s of CPU a start on the 2-core box (0.77 s with the bytecode, 1.02 s without).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(autouse=True)
def private_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own socket directory, so tests never see each other's hooks, and
    its own data directory, so recordings never land in the user's."""
    directory = tmp_path / "run"
    monkeypatch.setenv("GPUTOP_TRAIN_RUNTIME_DIR", str(directory))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return directory
