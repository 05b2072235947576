"""Write a partial screen update from where its dirty region starts, not from the widget's edge.

Textual (8.x) crops each widget's line to a dirty region's end but writes it from the widget's
left edge (its issue #5625), so a figure that changed at column 120 of a 160-column panel
rewrites 120 columns. Over SSH the bytes are the monitor's cost (issue: cost; the
measurement is in docs/benchmarks.md §5): this replaces ``ChopsUpdate.render_segments`` with
one that crops both ends. A line that holds a character wider than one cell is written from
the edge as before, since cutting into one would shift the rest of the line.

It also writes each style as a change from the one before: Textual writes every segment as
"set the whole style, text, reset", so a chart cell in another colour cost 24 bytes of codes
where its colour alone is 11 (codes were a third of the TUI's bytes on the replay of
docs/benchmarks.md §5, `tui_cost.py --breakdown`).
"""

from __future__ import annotations

import functools

from rich.color import ColorSystem
from rich.console import Console
from rich.control import Control
from rich.style import Style
from textual._compositor import ChopsUpdate
from textual.strip import Strip

_RESET = "\x1b[0m"
_DEFAULT_FOREGROUND, _DEFAULT_BACKGROUND = "39", "49"
# What a style sets on the terminal: its attribute bits (bold, dim, ...) and the codes of its
# foreground and background colours.
Pen = tuple[int, str | None, str | None]
_PLAIN: Pen = (0, None, None)


def _render_segments(self: ChopsUpdate, console: Console) -> str:
    """``ChopsUpdate.render_segments``, each chop cut to the span at both ends."""
    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        for end, (x, strip) in zip(self.chop_ends[y], self.chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start = x1 if x1 > x and strip.cell_length == len(strip.text) else x
            if start > x or end > x2:
                strip = strip.crop(start - x, min(end, x2) - x)
            append(move_to(start, y).segment.text)
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


def crop_partial_updates() -> None:
    """Install the cropping writer (idempotent); the app calls it before its first frame."""
    ChopsUpdate.render_segments = _render_segments  # type: ignore[method-assign]
