"""Where sessions are kept: the user data directory, one recording (+ log, summary) each."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from platformdirs import user_data_dir


def sessions_dir() -> Path:
    return Path(user_data_dir("gputop-train")) / "sessions"


def private_dir(directory: Path) -> Path:
    """``directory`` created 0700, and kept so: recordings hold command lines."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # ours: tighten one an older version left 0755
        if directory.stat().st_uid == os.getuid():
            directory.chmod(0o700)
    return directory


def new_session_stem(command: list[str], directory: Path | None = None) -> Path:
    """``<sessions>/2026-11-21T10-00-00-resnet``: add .jsonl, .log, .summary.md ...; a second
    session in the same second gets ``-2``."""
    is_python = Path(command[0]).name.startswith("python") and len(command) > 1
    name = Path(command[1] if is_python else command[0]).stem or "job"
    directory = private_dir(directory or sessions_dir())
    stem = directory / f"{time.strftime('%Y-%m-%dT%H-%M-%S')}-{name}"
    taken, suffix = stem, 2
    while Path(f"{taken}.jsonl").exists() or Path(f"{taken}.log").exists():
        taken = Path(f"{stem}-{suffix}")
        suffix += 1
    return taken
