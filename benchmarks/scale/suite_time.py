"""The test suite's time against an earlier tree's, side by side on one machine (issue 28).

A suite time depends on the machine and its load, so a figure from another day or box is no
baseline. This runs, in one sitting: the earlier tree's own suite as its CI ran it (a git
worktree, a venv that sees this interpreter's packages but imports the earlier
``gputop_train`` through a .pth), then this tree's suite as the README runs it, then this
tree's tests whose names the earlier suite had (the same tests, made faster or not). Each with
wall time and the CPU of everything it started.

    python -m benchmarks.scale.suite_time [--base a903fe9] [--work DIR] [--base-command ...]

The default base is the tree issue 28 was filed against (2026-11-24 10:47 UTC, 367 tests,
run serially by its .ci/run: ``python3 -m pytest``).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?)")
COLLECT_ONLY = ("--collect-only", "-q", "-p", "no:cacheprovider")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path) -> dict[str, Any]:
    """Run a pytest command to its end: wall time, CPU of it and all it reaped, its counts."""
    cpu, start = _children_cpu_s(), time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.monotonic() - start, _children_cpu_s() - cpu
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {kind.rstrip("s"): int(n) for n, kind in SUMMARY.findall(last)}
    return {
        "command": " ".join(command),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "exit": done.returncode,
        "counts": counts,
        "last_line": last,
    }


def collected(python: str, cwd: Path, *serially: str) -> list[str]:
    """The node ids a suite collects (``serially``: how that suite turns its workers off)."""
    done = subprocess.run(
        [python, "-m", "pytest", *COLLECT_ONLY, *serially],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def base_tree(base: str, work: Path) -> tuple[Path, str]:
    """A worktree of ``base`` and a venv whose python imports that tree's package."""
    tree, venv = work / "base", work / "venv"
    if not tree.exists():
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(tree), base], cwd=REPO, check=True
        )
    python = venv / "bin" / "python"
    if not python.exists():  # this interpreter's packages, the base tree's gputop_train first
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
            check=True,
        )
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(site, "suite_time_base.pth").write_text(f"{tree}\n")
    where = subprocess.run(
        [str(python), "-c", "import gputop_train; print(gputop_train.__file__)"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if not where.startswith(str(tree)):
        raise SystemExit(f"the venv imports {where.strip()}, not the base tree {tree}")
    return tree, str(python)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="a903fe9", help="the earlier commit (default: a903fe9)")
    parser.add_argument("--work", type=Path, help="where the worktree and venv go (kept)")
    parser.add_argument(
        "--base-command",
        nargs="+",
        default=["-m", "pytest", "-q", "-p", "no:xdist"],
        help="the base suite's pytest arguments after its python (its CI's)",
    )
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="suite-time-"))
    tree, python = base_tree(args.base, work)

    names = {node.split("::", 1)[1] for node in collected(python, tree, "-p", "no:xdist")}
    current = collected(sys.executable, REPO, "-n", "0")
    same = [node for node in current if node.split("::", 1)[1] in names]
    ids = work / "same_tests.txt"
    ids.write_text("\n".join(same) + "\n")

    results: dict[str, dict[str, Any]] = {
        "base": {
            "commit": args.base,
            "tests": len(names),
            **timed([python, *args.base_command], tree),
        },
        "current": {"tests": len(current), **timed([sys.executable, "-m", "pytest", "-q"], REPO)},
        "same_tests": {
            "tests": len(same),
            "of_base": len(names),
            **timed([sys.executable, "-m", "pytest", "-q", f"@{ids}"], REPO),
        },
    }
    for key in ("current", "same_tests"):
        results[key]["wall_vs_base"] = round(results[key]["wall_s"] / results["base"]["wall_s"], 3)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
