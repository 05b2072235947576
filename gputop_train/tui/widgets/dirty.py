"""Which cells of a line changed: the dirty regions a widget hands to ``refresh``.

With tui/partial_updates.py a dirty region is written from its first cell to its last, so a
line that changed in two places is cheaper as two regions, unless the cells between them
cost less to rewrite than a second cursor move and its style codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region

Cell = tuple[str, Style]
# Unchanged cells between two changes are rewritten rather than skipped up to this many: a
# skip costs a cursor move and the style codes again, about 20 bytes, where a cell costs 1 to
# 3 (a braille cell is 3 bytes of UTF-8).
MERGE_GAP_CELLS = 8
_NULL = Style.null()
_BLANK: Cell = (" ", _NULL)  # past a line's end: the padding


def cells_of(segments: Iterable[Segment]) -> list[Cell]:
    """(character, style) per cell of segments whose characters are one cell wide each; no
    style and Rich's empty style read the same."""
    return [(char, segment.style or _NULL) for segment in segments for char in segment.text]


def changed_spans(
    y: int, before: Sequence[Cell], after: Sequence[Cell], width: int
) -> list[Region]:
    """The regions of line ``y`` whose cells differ in character or style, within ``width``."""
    length = min(max(len(before), len(after)), width)
    spans: list[Region] = []
    start = end = -1
    for x in range(length):
        old = before[x] if x < len(before) else _BLANK
        new = after[x] if x < len(after) else _BLANK
        if old == new:
            continue
        if start >= 0 and x - end > MERGE_GAP_CELLS:
            spans.append(Region(start, y, end - start, 1))
            start = -1
        if start < 0:
            start = x
        end = x + 1
    if start >= 0:
        spans.append(Region(start, y, end - start, 1))
    return spans
