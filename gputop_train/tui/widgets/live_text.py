"""A text panel for figures that change every tick, repainted line by line.

``Static.update`` runs the whole text through Textual's content pipeline again and marks the
whole widget dirty, so the compositor redraws every widget under it. At 2 Hz that was most of
the dashboard's CPU. This widget keeps one strip per line and marks dirty only the cells whose
text changed: a tick that moves three figures repaints those figures (over SSH the bytes are
the cost: docs/benchmarks.md §5).
"""

from __future__ import annotations

from itertools import zip_longest

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.containers import ScrollableContainer
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from .dirty import changed_spans, line_of


def _changed_regions(
    y: int, old: Text, new: Text, rendered: tuple[list[Segment], list[Segment]], width: int
) -> list[Region]:
    """The cells of line ``y`` that differ in character or style (tui/widgets/dirty.py), from
    the lines' rendered segments; a line with characters wider than one cell is repainted
    whole."""
    if len(old.plain) != old.cell_len or len(new.plain) != new.cell_len:
        return [Region(0, y, width, 1)]
    before, after = (line_of(segments) for segments in rendered)
    return changed_spans(y, before, after, width)


def _render(line: Text, console: Console) -> list[Segment]:
    return list(line.render(console, end=""))


_EVERY_ROW = range(1 << 31)  # a widget that no parent scrolls: all of it is shown
_UNSIZED = -1  # a sticky widget whose width is not its text's (not `width: auto`)


class LiveText(Widget):
    """Shows a Rich ``Text``; wraps it to the width unless ``text.no_wrap`` (then it is cut,
    with an ellipsis if ``text.overflow`` says so).

    ``sticky``: the widget keeps the largest extent its text has had (until
    ``reset_extent``), so a table whose rows come and go repaints the rows that changed; a
    change of size makes Textual repaint the whole widget and everything it moves."""

    DEFAULT_CSS = """
    LiveText { height: auto; }
    """

    def __init__(
        self, *, id: str | None = None, classes: str | None = None, sticky: bool = False
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._sticky = sticky
        # The extent kept when sticky; columns only where the width follows the text.
        self._rows, self._columns = 0, _UNSIZED
        self._text = Text()
        self._lines: list[Text] = []
        self._lines_width = -1
        self._strips: dict[int, Strip] = {}
        # Each line's segments, rendered once: for the cells that changed and for its strip
        # (Rich's Text.render, three times a changed line, was most of this widget's time in a
        # py-spy profile of the live TUI: H200, 2026-11-24, docs/benchmarks.md §5).
        self._rendered: dict[int, list[Segment]] = {}
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
        if self._needs_layout(before, after):
            self._strips.clear()
            self._rendered.clear()
            self.refresh(layout=True)
            return
        blank = Text()
        padded = zip_longest(before, after, fillvalue=blank)
        changed = [(y, old, new) for y, (old, new) in enumerate(padded) if old != new]
        console = self.app.console
        shown = self._shown_rows()
        regions = []
        for y, old, new in changed:
            self._strips.pop(y, None)
            if y not in shown:  # scrolled out of sight: drawn from its text when shown
                self._rendered.pop(y, None)
                regions.append(Region(0, y, width, 1))
                continue
            was = self._rendered.get(y)
            now = self._rendered[y] = _render(new, console)
            rendered = (_render(old, console) if was is None else was, now)
            regions += _changed_regions(y, old, new, rendered, width)
        if regions:
            self.refresh(*regions)

    def _shown_rows(self) -> range:
        """The rows a scrolling parent shows (a process table of 30 compile workers in a panel
        of 14 rows): a changed row out of sight is marked whole, not rendered and compared."""
        parent = self.parent
        if not isinstance(parent, ScrollableContainer):
            return _EVERY_ROW
        top = parent.scroll_offset.y - self.virtual_region.y
        return range(top, top + parent.scrollable_content_region.height)

    def reset_extent(self) -> None:
        """Fit the text again (a sticky widget's new width, say)."""
        self._rows, self._columns = 0, _UNSIZED
        self.refresh(layout=True)

    def _needs_layout(self, before: list[Text], after: list[Text]) -> bool:
        """A new extent needs a layout of the screen; a sticky widget's text that still fits
        the box it was given (a table as tall as its panel, CSS ``min-height: 100%``) takes
        that room without one: each layout cost the whole screen (docs/benchmarks.md §5)."""
        if not self._sticky:
            return len(before) != len(after)
        size = self.size
        if len(after) > self._rows:
            if len(after) > size.height:
                return True
            self._rows = len(after)
        if self._columns == _UNSIZED:
            return False
        widest = max((line.cell_len for line in after), default=0)
        if widest > self._columns:
            if widest > size.width:
                return True
            self._columns = widest
        return False

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
        natural = max((line.cell_len for line in self._text.split("\n")), default=0)
        if self._sticky:
            self._columns = max(self._columns, natural)
            return self._columns
        return natural

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        natural = len(self._wrap(width)) if width != self._lines_width else len(self._lines)
        if self._sticky:
            self._rows = max(self._rows, natural)
            return self._rows
        return natural

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._lines_width:
            self._lines = self._wrap(width)
            self._lines_width = width
            self._strips.clear()
            self._rendered.clear()
        strip = self._strips.get(y)
        if strip is None:
            if self._base_style is None:
                self._base_style = self.rich_style
            base = self._base_style
            if y < len(self._lines):
                segments = self._rendered.get(y)
                if segments is None:
                    segments = self._rendered[y] = _render(self._lines[y], self.app.console)
                strip = Strip(Segment.apply_style(segments, base)).crop_extend(0, width, base)
            else:
                strip = Strip.blank(width, base)
            self._strips[y] = strip
        return strip

    def notify_style_update(self) -> None:
        """A theme or colour change restyles every line."""
        super().notify_style_update()
        self._base_style = None
        self._strips.clear()
        self._rendered.clear()
