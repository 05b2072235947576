"""Every raw result in docs/results says its commit, machine, date and command (issue 47): in
its own first line or ``NAME.meta`` (benchmarks/common/provenance.py writes them), or in a row
of docs/results/README.md's provenance table with the four filled in."""

from __future__ import annotations

import re

from benchmarks.common.provenance import TEXT_SUFFIXES
from tests.support.paths import REPO

RESULTS = REPO / "docs" / "results"
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# The line benchmarks/common/provenance.py writes: commit X; machine Y; date Z; command W.
HEADER = re.compile(r"commit (\S+); machine (.+); date (\S+); command (.+)")


def _table_rows() -> dict[str, list[str]]:
    text = (RESULTS / "README.md").read_text(encoding="utf-8")
    table = text.split("## Provenance", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _says_it_itself(name: str) -> bool:
    path = RESULTS / name
    meta = RESULTS / f"{name}.meta"
    if meta.is_file():
        return HEADER.match(meta.read_text(encoding="utf-8")) is not None
    if path.suffix in TEXT_SUFFIXES:
        first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        return HEADER.match(first) is not None
    return False


def _complete(cells: list[str]) -> bool:
    commit, machine, date, command = cells
    return bool(COMMIT.search(commit) and machine and DATE.search(date) and "`" in command)


def test_every_result_says_its_commit_machine_date_and_command() -> None:
    rows = _table_rows()
    files = [
        path.name
        for path in RESULTS.iterdir()
        if path.name != "README.md" and path.suffix != ".meta"
    ]
    silent = [
        name
        for name in sorted(files)
        if not _says_it_itself(name) and not (name in rows and _complete(rows[name]))
    ]
    assert silent == []


def test_the_table_names_only_files_that_are_here() -> None:
    assert sorted(name for name in _table_rows() if not (RESULTS / name).is_file()) == []


def test_a_row_missing_a_field_does_not_count() -> None:
    assert _complete(["≤abc1234", "dev box", "2026-12-05", "`python -m x`"])
    assert not _complete(["", "dev box", "2026-12-05", "`python -m x`"])
    assert not _complete(["abc1234", "dev box", "yesterday", "`python -m x`"])
    assert not _complete(["abc1234", "dev box", "2026-12-05", "the same run"])
