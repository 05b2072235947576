"""A text panel for figures that change every tick, repainted line by line.

``Static.update`` runs the whole text through Textual's content pipeline again and marks the
whole widget dirty, so the compositor redraws every widget under it. At 2 Hz that was most of
the dashboard's CPU. This widget keeps one strip per line and marks dirty only the cells whose
text changed: a tick that moves three figures repaints three lines up to the last changed
cell (over SSH the bytes are the cost: docs/benchmarks.md §5).
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


def _changed_cells(y: int, old: Text, new: Text, width: int, console: Console) -> Region:
    """The cells of line ``y`` that differ in character or style. Textual writes a partial
    update from the widget's left edge to the region's end, so a change early in a line
    (a figure after its label) no longer rewrites the rest of the line. Characters wider than
    one cell repaint the whole line."""
    before, after = _cells(old, console), _cells(new, console)
    if before is None or after is None:
        return Region(0, y, width, 1)
    blank = (" ", Style.null())  # past a line's end: the padding
    length = max(len(before), len(after))
    before += [blank] * (length - len(before))
    after += [blank] * (length - len(after))
    changed = [x for x in range(length) if before[x] != after[x]]
    if not changed:
        return Region(0, y, 0, 0)
    start, end = changed[0], min(changed[-1] + 1, width)
    return Region(start, y, max(end - start, 1), 1)


def _cells(line: Text, console: Console) -> list[tuple[str, Style]] | None:
    """(character, style) per cell; None if a character is not one cell wide."""
    if len(line.plain) != line.cell_len:
        return None
    null = Style.null()  # Rich renders "no style" as None or as an empty Style
    return [(char, seg.style or null) for seg in line.render(console, end="") for char in seg.text]


class LiveText(Widget):
    """Shows a Rich ``Text``; wraps it to the width unless ``text.no_wrap`` (then it is cut,
    with an ellipsis if ``text.overflow`` says so)."""

    DEFAULT_CSS = """
    LiveText { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text()
        self._lines: list[Text] = []
        self._lines_width = -1
        self._strips: dict[int, Strip] = {}
        self._base_style: Style | None = None  # computing it walks the DOM: once per style

    @property
    def text(self) -> Text:
        return self._text

    def show(self, text: Text) -> None:
        """Show ``text``: no work if it is unchanged, a re-layout only if its height changed."""
        if text == self._text:
            return
        self._text = text
        width = self._lines_width
        if width < 0:  # not laid out yet: the first layout wraps it
            self.refresh(layout=True)
            return
        before, after = self._lines, self._wrap(width)
        self._lines = after
        if len(before) != len(after):
            self._strips.clear()
            self.refresh(layout=True)
            return
        changed = [
            (y, old, new)
            for y, (old, new) in enumerate(zip(before, after, strict=True))
            if old != new
        ]
        console = self.app.console
        regions = [_changed_cells(y, old, new, width, console) for y, old, new in changed]
        for region in regions:
            self._strips.pop(region.y, None)
        if regions:
            self.refresh(*regions)

    def _wrap(self, width: int) -> list[Text]:
        text = self._text
        lines = list(text.split("\n", allow_blank=True))
        if text.no_wrap:
            if text.overflow == "ellipsis":
                for line in lines:
                    line.truncate(width, overflow="ellipsis")
            return lines
        if all(line.cell_len <= width for line in lines):
            return lines
        return list(text.wrap(self.app.console, width))

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((line.cell_len for line in self._text.split("\n")), default=0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._lines_width:
            return len(self._wrap(width))
        return len(self._lines)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._lines_width:
            self._lines = self._wrap(width)
            self._lines_width = width
            self._strips.clear()
        strip = self._strips.get(y)
        if strip is None:
            if self._base_style is None:
                self._base_style = self.rich_style
            base = self._base_style
            if y < len(self._lines):
                segments = Segment.apply_style(
                    self._lines[y].render(self.app.console, end=""), base
                )
                strip = Strip(segments).crop_extend(0, width, base)
            else:
                strip = Strip.blank(width, base)
            self._strips[y] = strip
        return strip

    def notify_style_update(self) -> None:
        """A theme or colour change restyles every line."""
        super().notify_style_update()
        self._base_style = None
        self._strips.clear()
