"""The user's own line behind something the hook saw: the first caller outside torch and
gputop-train. One frame walk serves the sync scan's call sites, each DataLoader's construction
and the census's hand-written attention, so a finding can name the line to edit
(docs/autopilot.md, "From findings to knob changes")."""

from __future__ import annotations

import contextlib
import linecache
import os
import weakref
from typing import Any

from .. import wire

_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The source line as a site carries it (SyncSite's op): enough to recognise, bounded on the wire.
MAX_OP_CHARS = 160

# Where each live DataLoader was constructed (file, line): noted once by the patched
# DataLoader.__init__ (patches.py), read once per epoch for its loader fact (feeds.py).
_loader_sites: weakref.WeakKeyDictionary[Any, tuple[str, int]] = weakref.WeakKeyDictionary()


def torch_dir(torch_module: Any) -> str:
    """The directory whose frames are torch's own (never where the user edits)."""
    return os.path.dirname(getattr(torch_module, "__file__", None) or "/nonexistent")


def user_line(frame: Any, torch_root: str) -> tuple[str, int] | None:
    """The innermost frame from ``frame`` outwards that is outside torch and the warnings
    machinery: the user's line (torch.unique's own file is not where to fix a sync). None
    when the chain reaches gputop-train first (our own call: a loader a knob rebuilt, our
    own set_sync_debug_mode)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_OUR_DIR):
            return None
        if not filename.startswith(torch_root) and not filename.endswith("warnings.py"):
            return (filename, frame.f_lineno)
        frame = frame.f_back
    return None


def code_site(filename: str, lineno: int) -> wire.CodeSite:
    """A place in the script as the wire carries it, with its source line (linecache: the
    file is read once, then cached)."""
    op = linecache.getline(filename, lineno).strip()[:MAX_OP_CHARS]
    return wire.CodeSite(file=filename, line=lineno, op=op)


def note_loader(loader: Any, frame: Any, torch_root: str) -> None:
    """Remember where ``loader`` was constructed (``frame``: its constructor's caller)."""
    site = user_line(frame, torch_root)
    if site is not None:
        with contextlib.suppress(TypeError):  # a subclass that is unhashable or unweakrefable
            _loader_sites[loader] = site


def loader_site(loader: Any) -> wire.CodeSite | None:
    """Where the script constructed ``loader``; None where the hook did not see it."""
    try:
        site = _loader_sites.get(loader)
    except TypeError:
        return None
    return code_site(*site) if site is not None else None
