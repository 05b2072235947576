"""py-spy's data-wait against the hook's, from the runs of `bash benchmarks/gpu.sh pyspy`.

    python -m benchmarks.diagnosis.pyspy_vs_hook DIR  # NAME-hook.jsonl, NAME-pyspy.jsonl

Hook: the median of ``data_wait_pct`` over the second half of the status lines (start-up
excluded). py-spy: the median over its windows, each counted once, the first left out (it may
see the start-up of the attach itself).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def statuses(path: Path) -> list[dict]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
    return [s for s in map(json.loads, lines) if s.get("type") == "status"]


def hook_wait(path: Path) -> float | None:
    waits = [s["data_wait_pct"] for s in statuses(path) if s.get("data_wait_pct") is not None]
    late = waits[len(waits) // 2 :]
    return statistics.median(late) if late else None


def pyspy_windows(path: Path) -> list[dict]:
    windows: list[dict] = []
    for status in statuses(path):
        stacks = status.get("stacks")
        if stacks and (not windows or stacks != windows[-1]):
            windows.append(stacks)
    return windows[1:]


def main() -> None:
    directory = Path(sys.argv[1])
    print(f"{'run':<8}{'hook data-wait':>16}{'py-spy data wait':>18}{'windows':>9}  py-spy shares")
    for hook_path in sorted(directory.glob("*-hook.jsonl")):
        name = hook_path.name.removesuffix("-hook.jsonl")
        windows = pyspy_windows(directory / f"{name}-pyspy.jsonl")
        waits = [w["shares"]["data wait"] for w in windows]
        shares = {
            k: round(statistics.median(w["shares"][k] for w in windows), 1)
            for k in (windows[0]["shares"] if windows else {})
        }
        hook = hook_wait(hook_path)
        spy = statistics.median(waits) if waits else None
        print(
            f"{name:<8}{'N/A' if hook is None else f'{hook:.1f}%':>16}"
            f"{'N/A' if spy is None else f'{spy:.1f}%':>18}{len(windows):>9}  {shares}"
        )


if __name__ == "__main__":
    main()
