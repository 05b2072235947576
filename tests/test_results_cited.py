"""Every raw output a page cites is in the tree (issue 40): docs/results holds what the README
and docs/ cite, so a pruned file must leave no citation behind, and a page that still tells of a
removed run cites it as `git show COMMIT:docs/results/NAME`, which this test leaves to git."""

from __future__ import annotations

import fnmatch
import re

from tests.support.paths import REPO

RESULTS = REPO / "docs" / "results"
PAGES = [
    REPO / "README.md",
    REPO / "benchmarks" / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
]
# `docs/results/NAME` anywhere, or `](results/NAME)` in a docs/ page's link; a path after
# "COMMIT:" is a removed file read through git, not a file of the tree.
_CITED = re.compile(r"(?<![:\w/])(?:docs/results/|(?<=\]\()results/)([^\s`)'\"<>|]+)")


def expand_braces(pattern: str) -> list[str]:
    """`a-{x,y}.{json,txt}` as the shell expands it: every combination, in order."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [name for alt in match.group(1).split(",") for name in expand_braces(head + alt + tail)]


def cited_names(text: str) -> list[str]:
    """The file names (or `*` patterns) under docs/results that a page's text cites."""
    names = []
    for match in _CITED.finditer(text):
        cited = match.group(1).rstrip(".,;:")
        names += [name for name in expand_braces(cited) if name]
    return names


def missing(names: list[str], present: set[str]) -> list[str]:
    return [name for name in names if not fnmatch.filter(present, name)]


def test_the_reading_expands_the_forms_the_pages_use() -> None:
    text = (
        "runs in `docs/results/a-{x,y}.{json,txt}`, the table docs/results/b.txt. Gone:"
        " `git show b5f4562:docs/results/c.tar.gz`; ![shot](results/d.png); the folder"
        " docs/results/ and `docs/results/e-*.txt`."
    )
    assert cited_names(text) == [
        "a-x.json",
        "a-x.txt",
        "a-y.json",
        "a-y.txt",
        "b.txt",
        "d.png",
        "e-*.txt",
    ]
    assert missing(
        cited_names(text), {"a-x.json", "a-x.txt", "a-y.json", "a-y.txt", "b.txt", "e-1.txt"}
    ) == ["d.png"]


def test_every_results_path_a_page_cites_is_in_the_tree() -> None:
    present = {path.name for path in RESULTS.iterdir()}
    absent = {
        page.relative_to(REPO).as_posix(): missing(
            cited_names(page.read_text(encoding="utf-8")), present
        )
        for page in PAGES
    }
    assert {page: names for page, names in absent.items() if names} == {}


def test_every_file_the_results_index_lists_is_in_the_tree() -> None:
    # docs/results/README.md names each file in its table's first column, a sibling by its
    # suffix alone (`name.json`, `.log`, `-recompute.txt`).
    present = {path.name for path in RESULTS.iterdir()}
    listed = []
    for row in (RESULTS / "README.md").read_text(encoding="utf-8").splitlines():
        if not row.startswith("| `"):
            continue
        base = ""
        for token in re.findall(r"`([^`]+)`", row.split("|")[1]):
            if token.startswith("git show "):  # a removed file, read through git
                continue
            if token.startswith((".", "-")):
                token = re.sub(r"(\.tar\.gz|\.[a-z]+)$", "", base) + token
            else:
                base = token
            listed.append(token)
    assert listed
    assert [name for name in listed if name not in present] == []
