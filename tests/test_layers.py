"""The layer rule of docs/architecture.md, held by importing each layer in a clean process."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEADLESS_MODULES = [
    "gputop_train.wire",
    "gputop_train.samples",
    "gputop_train.hook",
    "gputop_train.collect.nvml",
    "gputop_train.collect.procs",
    "gputop_train.collect.stacks",
    "gputop_train.collect.fake",
    "gputop_train.session.model",
    "gputop_train.advise.rules",
    "gputop_train.advise.mfu",
    "gputop_train.autopilot.pilot",
    "gputop_train.views",
    "gputop_train.tables",
    "gputop_train.record.recorder",
    "gputop_train.record.reader",
    "gputop_train.record.replay",
    "gputop_train.record.summary",
    "gputop_train.job.launched",
    "gputop_train.job.attached",
    "gputop_train.monitor.monitor",
    "gputop_train.front_end",
    "gputop_train.headless",
    "gputop_train.cli",
    "gputop_train.cli.run",
    "gputop_train.cli.drive",
    "gputop_train.cli.sessions",
]
UI_LIBRARIES = ("textual", "rich")
# The hook runs inside the user's job: the standard library (and torch, lazily) only.
HOOK_FORBIDDEN = (*UI_LIBRARIES, "psutil", "pynvml", "platformdirs", "torch")


def _loaded_after_import(module: str, prefixes: tuple[str, ...]) -> list[str]:
    code = (
        f"import sys, {module}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {prefixes!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout)


@pytest.mark.parametrize("module", HEADLESS_MODULES)
def test_headless_layers_never_import_the_ui(module: str) -> None:
    assert _loaded_after_import(module, UI_LIBRARIES) == []


@pytest.mark.parametrize("module", ["gputop_train.hook", "gputop_train.hook.patches"])
def test_the_hook_imports_only_the_standard_library(module: str) -> None:
    assert _loaded_after_import(module, HOOK_FORBIDDEN) == []
