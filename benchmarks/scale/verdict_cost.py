"""The straggler verdict's time (advise/rank_verdict.judge) at n ranks, three windows, one rank
slowed in its input; this tree's module against another's (``OLD``, e.g. main's before the
verdict was O(n log n): ``git show 8906ba3:gputop_train/advise/rank_verdict.py > /tmp/old.py``),
in the order old, new, new, old at each size; the old one only up to 1,600 ranks (quadratic).

    python -m benchmarks.scale.verdict_cost /tmp/old.py
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import time
from pathlib import Path
from types import ModuleType

NEW = Path(__file__).resolve().parents[2] / "gputop_train" / "advise" / "rank_verdict.py"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def windows(module: ModuleType, n: int) -> list[list[object]]:
    rng = random.Random(n)
    return [
        [
            module.RankWindow(
                r, f"node-{r // 8}", 20, 60 + rng.random(),
                30 + rng.random() if r else 1.0, 1.0 if r else 31.0,
            )
            for r in range(n)
        ]
        for _ in range(3)
    ]  # fmt: skip


def main() -> int:
    modules = {"new": load(NEW, "rank_verdict_new")}
    if len(sys.argv) > 1:
        modules["old"] = load(Path(sys.argv[1]), "rank_verdict_old")
    out: dict[str, list[float]] = {}
    for n in (200, 800, 1600, 8000):
        for label in ("old", "new", "new", "old"):
            if label not in modules or (label == "old" and n > 1600):
                continue
            history = windows(modules[label], n)
            started = time.perf_counter()
            verdict = modules[label].judge(history)
            took = time.perf_counter() - started
            out.setdefault(f"{label}_{n}", []).append(round(took, 4))
            print(label, n, f"{took:.3f} s", verdict.ranks if verdict else None, flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
