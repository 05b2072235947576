"""Install tui/partial_updates.py's renderer and writer only where they fit this Textual, and
keep the screen drawn when they do not (issue 28, point 2).

They replace two methods of Textual's private compositor for the whole process and reach
private attributes of Textual and Rich. pyproject.toml bounds the versions they were tested
with; an environment outside those bounds (a pinned older Textual, ``--no-deps``, a newer one
installed by hand) is caught here:

- at start-up, ``install_partial_updates`` checks that every internal they use exists with the
  shape they expect and runs the writer once on a known line; if anything is missing it keeps
  Textual's own renderer and says why, once (``take_notice``; the app shows it);
- on each frame, an exception in either replacement renders that frame by Textual's own path
  instead; the errors are counted (``renderer_status``) and the first one is said once.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from . import partial_updates


@dataclass(frozen=True)
class RendererStatus:
    """Which renderer draws the screen, and how often ours failed a frame."""

    installed: bool  # ours: rows of the touched widgets, cropped at both ends
    reason: str | None  # why Textual's own is kept, when it is
    frame_errors: int  # frames that ours failed and Textual's drew
    first_error: str | None


# (owner, attribute, the parameters ours passes it, or None for a value ours reads)
_Need = tuple[str, str, tuple[str, ...] | None]
_NEEDS: tuple[_Need, ...] = (
    ("textual._compositor:Compositor", "render_partial_update", ("self",)),
    ("textual._compositor:Compositor", "_regions_to_spans", ("regions",)),
    ("textual._compositor:Compositor", "cuts", None),
    ("textual._compositor:Compositor", "visible_widgets", None),
    ("textual._compositor:Compositor", "size", None),
    ("textual._compositor:Compositor", "_dirty_regions", None),
    ("textual._compositor:ChopsUpdate", "__init__", ("self", "chops", "spans", "chop_ends")),
    ("textual._compositor:ChopsUpdate", "render_segments", ("self", "console")),
    ("textual.strip:Strip", "crop", ("self", "start", "end")),
    ("textual.strip:Strip", "divide", ("self", "cuts")),
    ("textual.strip:Strip", "render_style", ("style", "text", "color_system")),
    ("textual.strip:Strip", "render_ansi", ("style", "color_system")),
    ("textual.widget:Widget", "render_lines", ("self", "crop")),
    ("textual.geometry:Region", "from_union", ("regions",)),
    ("rich.style:Style", "_attributes", None),
    ("rich.style:Style", "_set_attributes", None),
    ("rich.console:Console", "_color_system", None),
)
# Instances whose attributes are set in __init__ (not visible on the class).
_SAMPLES: dict[str, Callable[[], object]] = {
    "textual._compositor:Compositor": lambda: _load("textual._compositor:Compositor")(),
    "rich.style:Style": lambda: Style(bold=True, color="red"),
    "rich.console:Console": lambda: Console(color_system="truecolor", file=None),
}
_CSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_lock = threading.Lock()
_installed = False
_reason: str | None = None
_frame_errors = 0
_first_error: str | None = None
_notices: list[str] = []


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def missing_internals() -> list[str]:
    """What this Textual/Rich lacks of what the replacements use ("Owner.name: why"); empty
    when everything is there with the expected shape."""
    problems: list[str] = []
    samples: dict[str, object] = {}
    for target, name, params in _NEEDS:
        label = f"{target.partition(':')[2]}.{name}"
        try:
            owner = _load(target)
        except (ImportError, AttributeError) as error:
            problems.append(f"{label}: {error}")
            continue
        if params is None:
            if target in _SAMPLES and target not in samples:
                try:
                    samples[target] = _SAMPLES[target]()
                except Exception as error:
                    problems.append(f"{label}: cannot make one ({error!r})")
                    continue
            holder = samples.get(target, owner)
            if not hasattr(holder, name):
                problems.append(f"{label}: missing")
            continue
        member = getattr(owner, name, None)
        if not callable(member):
            problems.append(f"{label}: missing")
            continue
        try:
            found = list(inspect.signature(member).parameters.values())
        except (TypeError, ValueError):
            problems.append(f"{label}: no signature")
            continue
        names = tuple(p.name for p in found)
        # Ours passes exactly these: a new parameter must have a default.
        extra_required = [
            p.name
            for p in found[len(params) :]
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if names[: len(params)] != params or extra_required:
            problems.append(f"{label}: takes {names}, expected {params}")
    return problems


def _writer_works() -> str | None:
    """Run the writer on a line with two styles, cropped; None when it shows what Textual's
    writer shows, else what went wrong."""
    chops_update = _load("textual._compositor:ChopsUpdate")
    strip = Strip(
        [Segment("abcdef", Style(color="red", bold=True)), Segment("ghij", Style(bgcolor="blue"))]
    )
    update = chops_update([{0: strip}], [(0, 2, 8)], [[10]])
    console = Console(color_system="truecolor", file=None)
    try:
        ours = partial_updates.render_segments(update, console)
        theirs = partial_updates.TEXTUAL_RENDER_SEGMENTS(update, console)
    except Exception as error:
        return f"the writer failed on a test line: {error!r}"
    if _CSI.sub("", ours) != "cdefgh" or "cdefgh" not in _CSI.sub("", theirs):
        return "the writer's test line differs from Textual's"
    return None


def _versions() -> str:
    found = []
    for package in ("textual", "rich"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} ?")
    return ", ".join(found)


def _writes_until_the_terminal_is_gone(self: Any) -> None:
    """Textual's output thread (``WriterThread.run``), which outlives its terminal: once a
    write fails (EIO: the pty was closed, an SSH drop) it takes and drops what is queued until
    it is stopped. Textual's own died at the first failed write; its queue (30 writes) filled,
    and the app's next write blocked the main thread in ``Queue.put`` for good: a TUI whose
    terminal went away before its SIGHUP never exited, SIGTERM included (issue 46)."""
    gone = False
    while (text := self._queue.get()) is not None:
        if gone:
            continue
        try:
            self._file.write(text)
            if self._queue.qsize() == 0:
                self._file.flush()
        except (OSError, ValueError):
            gone = True
    if not gone:
        with contextlib.suppress(OSError, ValueError):
            self._file.flush()


def _install_gone_terminal_writes() -> None:
    """Textual's output thread replaced by one that survives its terminal, where it has the
    shape ours reads (a ``_queue`` and a ``_file``, set in ``__init__``)."""
    try:
        writer = _load("textual.drivers._writer_thread:WriterThread")
        init = inspect.getsource(writer.__init__)
    except (ImportError, AttributeError, OSError, TypeError):
        return
    if "self._queue" in init and "self._file" in init:
        writer.run = _writes_until_the_terminal_is_gone


def install_partial_updates() -> RendererStatus:
    """Install ours where this Textual has what it needs (idempotent), else keep Textual's own
    and queue a notice saying why; the app calls it before its first frame."""
    global _installed, _reason
    _install_gone_terminal_writes()
    with _lock:
        problems = missing_internals()
        if not problems:
            why = _writer_works()
            problems = [why] if why else []
        if problems:
            _restore()
            reason = f"{'; '.join(problems)} ({_versions()})"
            if reason != _reason:
                _notices.append(
                    "The terminal writer is Textual's own (it writes more bytes per frame): "
                    f"this Textual lacks what ours needs: {reason}"
                )
            _installed, _reason = False, reason
        else:
            compositor = _load("textual._compositor:Compositor")
            chops_update = _load("textual._compositor:ChopsUpdate")
            compositor.render_partial_update = _guarded_render_partial_update
            chops_update.render_segments = _guarded_render_segments
            _installed, _reason = True, None
    return renderer_status()


def uninstall_partial_updates() -> None:
    """Put Textual's own renderer and writer back (benchmarks and tests compare both)."""
    global _installed
    with _lock:
        _restore()
        _installed = False


def _restore() -> None:
    try:
        compositor = _load("textual._compositor:Compositor")
        chops_update = _load("textual._compositor:ChopsUpdate")
    except (ImportError, AttributeError):
        return
    if partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE is not None:
        compositor.render_partial_update = partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE
    if partial_updates.TEXTUAL_RENDER_SEGMENTS is not None:
        chops_update.render_segments = partial_updates.TEXTUAL_RENDER_SEGMENTS


def _frame_failed(part: str, error: Exception) -> None:
    global _frame_errors, _first_error
    with _lock:
        _frame_errors += 1
        if _first_error is None:
            _first_error = f"{part}: {error!r}"
            _notices.append(
                f"The terminal writer failed a frame ({_first_error}); that frame and any "
                "later failing one are drawn by Textual's own renderer."
            )


def _guarded_render_partial_update(self: Any) -> Any:
    """Ours; on an exception, the same dirty regions rendered by Textual's."""
    dirty = set(self._dirty_regions)
    try:
        return partial_updates.render_partial_update(self)
    except Exception as error:
        _frame_failed("render", error)
        self._dirty_regions.clear()
        self._dirty_regions.update(dirty)
        return partial_updates.TEXTUAL_RENDER_PARTIAL_UPDATE(self)


def _guarded_render_segments(self: Any, console: Console) -> str:
    """Ours; on an exception, the same update written by Textual's."""
    try:
        return partial_updates.render_segments(self, console)
    except Exception as error:
        _frame_failed("write", error)
        return partial_updates.TEXTUAL_RENDER_SEGMENTS(self, console)


def renderer_status() -> RendererStatus:
    return RendererStatus(_installed, _reason, _frame_errors, _first_error)


def take_notice() -> str | None:
    """The next thing to tell the user about the renderer, once; None when there is none."""
    with _lock:
        return _notices.pop(0) if _notices else None


def reset_for_tests() -> None:
    """Forget the counts and notices (tests that make frames fail start from zero)."""
    global _frame_errors, _first_error, _reason
    with _lock:
        _frame_errors, _first_error, _reason = 0, None, None
        _notices.clear()
