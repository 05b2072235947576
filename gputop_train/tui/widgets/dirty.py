"""Which cells of a line changed: the dirty regions a widget hands to ``refresh``.

With tui/partial_updates.py a dirty region is written from its first cell to its last, so a
line that changed in two places is cheaper as two regions, unless the cells between them
cost less to rewrite than a second cursor move and its style codes.

A line is compared as two strings of one character per cell: its text, and a key per cell
naming the cell's style. String slices compare in C, so a line whose figures moved in two
places costs two short loops, not one Python step per cell of the line (a (character, style)
pair per cell was a third of a text panel's update: docs/benchmarks.md §5).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region

# A line as compared: its characters, and one style key per character.
Line = tuple[str, str]
# Unchanged cells between two changes are rewritten rather than skipped up to this many: a
# skip costs a cursor move and the style codes again, about 20 bytes, where a cell costs 1 to
# 3 (a braille cell is 3 bytes of UTF-8).
MERGE_GAP_CELLS = 8
# Cells compared at once before a cell-by-cell look: a panel line changes in a few places.
_CHUNK = 16
_NO_STYLE = "\0"  # no style and Rich's empty style read the same (as the padding past an end)
_KEYS: dict[Style, str] = {}
# One key per style seen: a code point of the private-use planes (a screen holds a few dozen
# styles; past this many the keys start over, which only a corrupt theme could reach).
_FIRST_KEY, _KEY_ROOM = 0xF0000, 0x20000


def _key(style: Style | None) -> str:
    if not style:
        return _NO_STYLE
    key = _KEYS.get(style)
    if key is None:
        if len(_KEYS) >= _KEY_ROOM:
            _KEYS.clear()
        key = _KEYS[style] = chr(_FIRST_KEY + len(_KEYS))
    return key


def line_of(segments: Iterable[Segment]) -> Line:
    """A line of segments whose characters are one cell wide each, as compared."""
    texts: list[str] = []
    keys: list[str] = []
    for text, style, _ in segments:
        texts.append(text)
        keys.append(_key(style) * len(text))
    return "".join(texts), "".join(keys)


def changed_spans(y: int, before: Line, after: Line, width: int) -> list[Region]:
    """The regions of line ``y`` whose cells differ in character or style, within ``width``."""
    length = min(max(len(before[0]), len(after[0])), width)
    old_text, new_text = before[0][:length].ljust(length), after[0][:length].ljust(length)
    old_keys = before[1][:length].ljust(length, _NO_STYLE)
    new_keys = after[1][:length].ljust(length, _NO_STYLE)
    if old_text == new_text and old_keys == new_keys:
        return []
    spans: list[Region] = []
    start = end = -1
    for chunk in range(0, length, _CHUNK):
        stop = chunk + _CHUNK
        if (
            old_text[chunk:stop] == new_text[chunk:stop]
            and old_keys[chunk:stop] == new_keys[chunk:stop]
        ):
            continue
        for x in range(chunk, min(stop, length)):
            if old_text[x] == new_text[x] and old_keys[x] == new_keys[x]:
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
