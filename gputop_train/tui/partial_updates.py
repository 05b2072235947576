"""Render a partial screen update from the widgets it touches, and write it from where its dirty
region starts, not from the widget's edge (issue: cost; measurements in docs/benchmarks.md §5).

- Textual (8.x) renders, for a partial update, every widget that overlaps the rectangle around
  all dirty regions, each from its first row to its last: a clock in the header and a figure
  in a chart 30 rows below made every panel between them fetch, filter and crop each of its
  lines, and the containers behind the panels too. ``Compositor.render_partial_update`` is
  replaced by one that renders only the rows of the widgets a dirty region touches where no
  widget in front hides them.
- Textual crops each widget's line to a dirty region's end but writes it from the widget's
  left edge (its issue #5625), so a figure that changed at column 120 of a 160-column panel
  rewrites 120 columns. ``ChopsUpdate.render_segments`` is replaced by one that crops both
  ends. A line that holds a character wider than one cell is written from the edge as before,
  since cutting into one would shift the rest of the line.
- It also writes each style as a change from the one before: Textual writes every segment as
  "set the whole style, text, reset", so a chart cell in another colour cost 24 bytes of codes
  where its colour alone is 11 (codes were a third of the TUI's bytes on the replay,
  `tui_cost.py --breakdown`).

Both are checked against Textual's own in tests/test_terminal_output.py. They reach Textual's and
Rich's internals: tui/renderer_guard.py installs them only where those are as expected, and
draws a frame that fails here by Textual's own path.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

_RESET = "\x1b[0m"
_DEFAULT_FOREGROUND, _DEFAULT_BACKGROUND = "39", "49"
# What a style sets on the terminal: its attribute bits (bold, dim, ...) and the codes of its
# foreground and background colours.
Pen = tuple[int, str | None, str | None]
_PLAIN: Pen = (0, None, None)

# Textual's own, which ours is checked against (tests/test_terminal_output.py) and falls back
# to; None where this Textual has no such private module.
TEXTUAL_RENDER_PARTIAL_UPDATE: Any = None
TEXTUAL_RENDER_SEGMENTS: Any = None
try:
    from textual._compositor import ChopsUpdate, Compositor
except ImportError:  # renderer_guard keeps Textual's own renderer and says why
    pass
else:
    TEXTUAL_RENDER_PARTIAL_UPDATE = Compositor.render_partial_update
    TEXTUAL_RENDER_SEGMENTS = ChopsUpdate.render_segments


def render_segments(self: ChopsUpdate, console: Console) -> str:
    """``ChopsUpdate.render_segments``, each chop cut to the span at both ends."""
    sequences: list[str] = []
    append = sequences.append
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        for end, (x, strip) in zip(self.chop_ends[y], self.chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start = x1 if x1 > x and strip.cell_length == len(strip.text) else x
            if start > x or end > x2:
                strip = strip.crop(start - x, min(end, x2) - x)
            append(f"\x1b[{y + 1};{start + 1}H")  # Control.move_to's, without its objects
            append(render_strip(strip, console._color_system or ColorSystem.TRUECOLOR))
        if y != last_y:
            append("\n")
    return "".join(sequences)


def render_strip(strip: Strip, color_system: ColorSystem) -> str:
    """What ``Strip.render`` writes, with each style written as a change from the last; the
    terminal is left in the default style, as Textual leaves it."""
    out: list[str] = []
    state: Pen | None = None  # None: the terminal's default style
    for text, style, _ in strip:
        if style is not None and style.link:  # a hyperlink: written as Textual writes it
            if state is not None:
                out.append(_RESET)
                state = None
            out.append(Strip.render_style(style, text, color_system))
            continue
        pen = None if style is None else _state(style, color_system)
        new = None if pen == _PLAIN else pen  # a style that sets nothing: the bare text
        if new != state:
            if style is None or new is None:
                out.append(_RESET)
            else:
                out.append(_change(state, new, style, color_system))
            state = new
        out.append(text)
    if state is not None:
        out.append(_RESET)
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _state(style: Style, color_system: ColorSystem) -> Pen:
    """The pen of ``style`` (cached: a screen holds a few dozen styles)."""
    color, bgcolor = style.color, style.bgcolor
    return (
        style._attributes & style._set_attributes,
        None if color is None else ";".join(color.downgrade(color_system).get_ansi_codes()),
        None
        if bgcolor is None
        else ";".join(bgcolor.downgrade(color_system).get_ansi_codes(False)),
    )


def _change(old: Pen | None, new: Pen, style: Style, color_system: ColorSystem) -> str:
    """The codes from ``old`` to ``new``: only the colours that changed when the attributes
    (bold, dim, ...) are the same, else a reset and the whole style."""
    if old is None:  # from the reset state: the style alone
        return f"\x1b[{Strip.render_ansi(style, color_system)}m"
    if old[0] != new[0]:
        return f"\x1b[0;{Strip.render_ansi(style, color_system)}m"
    codes = []
    if new[1] != old[1]:
        codes.append(new[1] or _DEFAULT_FOREGROUND)
    if new[2] != old[2]:
        codes.append(new[2] or _DEFAULT_BACKGROUND)
    return f"\x1b[{';'.join(codes)}m"


def render_partial_update(self: Compositor) -> ChopsUpdate | None:
    """``Compositor.render_partial_update`` rendering only the rows of the widgets that a dirty
    region touches and that widgets in front do not hide (containers behind their panels).
    A chop that no span reaches may stay None; ``render_segments`` skips it."""
    screen = self.size.region
    regions = [r for r in (screen.intersection(r) for r in self._dirty_regions) if r]
    self._dirty_regions.clear()
    if not regions:
        return None
    spans = list(self._regions_to_spans(regions))
    spans_by_row: dict[int, list[tuple[int, int]]] = {}
    for y, x1, x2 in spans:
        spans_by_row.setdefault(y, []).append((x1, x2))
    around = Region.from_union(regions)
    cuts = self.cuts
    chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
    for widget, (region, clip) in self.visible_widgets.items():  # front to back
        visible = region.intersection(clip)
        if not around.overlaps(visible):
            continue
        rows = _rows_to_render(visible, spans_by_row, chops, cuts)
        if rows is None:
            continue  # untouched, or a container behind its panels: none of it shows here
        band = Region(visible.x, rows[0], visible.width, rows[1] - rows[0])
        first_cut, last_cut = band.column_span
        strips = widget.render_lines(band.translate((-region.x, -region.y)))
        for y, strip in zip(band.line_range, strips, strict=False):
            if y not in spans_by_row:
                continue
            chops_line = chops[y]
            final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
            pieces = strip.divide([cut - band.x for cut in final_cuts[1:]])
            for cut, piece in zip(final_cuts, pieces, strict=False):
                if chops_line.get(cut) is None:  # the front widget's piece wins
                    chops_line[cut] = piece
    chop_ends = [cut_set[1:] for cut_set in cuts]
    return ChopsUpdate(chops, spans, chop_ends)


def _rows_to_render(
    visible: Region,
    spans: dict[int, list[tuple[int, int]]],
    chops: list[dict[int, Strip | None]],
    cuts: list[list[int]],
) -> tuple[int, int] | None:
    """The first and past-the-last row of ``visible`` in which a span reaches a chop that no
    widget in front has filled, or None."""
    x1, x2 = visible.column_span
    rows = [
        y
        for y in visible.line_range
        if y in spans
        and any(
            x1 <= x < x2
            and chops[y][x] is None
            and any(start < end and x < stop for start, stop in spans[y])
            for x, end in itertools.pairwise(cuts[y])
        )
    ]
    return (rows[0], rows[-1] + 1) if rows else None
