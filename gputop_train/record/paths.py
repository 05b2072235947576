"""Where sessions are kept: the user data directory, one recording (+ log, summary) each."""

from __future__ import annotations

import time
from pathlib import Path

from platformdirs import user_data_dir


def sessions_dir() -> Path:
    return Path(user_data_dir("gputop-train")) / "sessions"


def new_session_stem(command: list[str], directory: Path | None = None) -> Path:
    """``<sessions>/2026-11-21T10-00-00-resnet``: add .jsonl, .log, .summary.md ..."""
    is_python = Path(command[0]).name.startswith("python") and len(command) > 1
    name = Path(command[1] if is_python else command[0]).stem or "job"
    directory = directory or sessions_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{time.strftime('%Y-%m-%dT%H-%M-%S')}-{name}"
