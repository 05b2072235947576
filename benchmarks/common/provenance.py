"""What every raw result says (docs/results/README.md): the commit it ran on, the machine, the
date (UTC) and the command. A text or Markdown result takes it as its first line; a JSON one
as a sidecar ``NAME.meta``, since a header would break the format."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .paths import REPO

TEXT_SUFFIXES = (".txt", ".md", ".log")


@dataclass(frozen=True)
class Provenance:
    commit: str
    machine: str
    date: str
    command: str

    def line(self) -> str:
        return (
            f"commit {self.commit}; machine {self.machine}; date {self.date}; "
            f"command {self.command}"
        )


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> str:
    """This checkout's short commit, ``+dirty`` when the tracked files differ from it."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown (not a git checkout)"
    return head + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    """The GPUs (nvidia-smi's names) or none, the cores, and the 1-minute load seen now."""
    gpus = ""
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        try:
            names = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            names = ""
        found = [name.strip() for name in names.splitlines() if name.strip()]
        gpus = f"{len(found)}x {found[0]}" if found else ""
    load = os.getloadavg()[0]
    return f"{gpus or 'no GPU'}, {os.cpu_count()} cores, 1-min load {load:.1f}"


def _command_words() -> list[str]:
    """This process's command as it was typed: ``python -m MODULE ARGS`` for a module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return ["python", "-m", spec.name, *sys.argv[1:]]
    return ["python", *sys.argv]


def provenance(argv: list[str] | None = None) -> Provenance:
    """This run's provenance; the command is this process's unless ``argv`` (after
    ``python``) is given."""
    words = _command_words() if argv is None else ["python", *argv]
    date = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    return Provenance(commit(), machine(), date, shlex.join(words))


def write_result(path: Path, text: str, origin: Provenance | None = None) -> None:
    """``text`` to ``path`` with its provenance: a first line for text, a ``.meta`` beside
    anything else."""
    origin = origin or provenance()
    if path.suffix in TEXT_SUFFIXES:
        path.write_text(f"{origin.line()}\n{text}", encoding="utf-8")
        return
    path.write_text(text, encoding="utf-8")
    path.with_name(path.name + ".meta").write_text(origin.line() + "\n", encoding="utf-8")
