"""The ``gputop-train`` command, run as a user runs it, from this checkout."""

from __future__ import annotations

import subprocess
import sys

from .paths import REPO


def gputop(
    *args: str, timeout: float = 180.0, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_train", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        **kwargs,  # type: ignore[arg-type]
    )
