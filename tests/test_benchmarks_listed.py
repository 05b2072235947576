"""Every benchmark script is listed in benchmarks/README.md with what it measures and the page
that cites it (issue 47), under its topic folder."""

from __future__ import annotations

import re

from tests.support.paths import REPO

BENCHMARKS = REPO / "benchmarks"
TOPICS = ("overhead", "diagnosis", "autopilot", "ranks", "frontends", "scale")
SHARED = ("common", "scenarios")  # the scaffolding the scripts share, listed in a paragraph


def _scripts() -> list[str]:
    found = []
    for path in BENCHMARKS.rglob("*"):
        relative = path.relative_to(BENCHMARKS)
        if path.suffix not in (".py", ".sh") or path.name == "__init__.py":
            continue
        if relative.parts[0] in SHARED or path.name.endswith("_style.py"):
            continue
        found.append(relative.as_posix())
    return sorted(found)


def test_every_script_sits_in_a_topic_folder_but_the_gpu_entry_point() -> None:
    loose = [s for s in _scripts() if "/" not in s and s != "gpu.sh"]
    assert loose == []
    assert {s.split("/")[0] for s in _scripts() if "/" in s} <= set(TOPICS)


def test_every_script_has_a_row_with_what_it_measures_and_its_page() -> None:
    rows = {}
    for row in (BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.split("|")[1:-1]]
        if len(cells) == 4:
            for name in re.findall(r"`([\w/]+\.(?:py|sh))`", cells[0]):
                rows[name] = cells
    unlisted = [s for s in _scripts() if s not in rows and s != "gpu.sh"]
    assert unlisted == []
    assert all(rows[s][1] and rows[s][3] for s in _scripts() if s in rows)
