"""The report's one optional dependency, asked for before anything imports it: matplotlib
(and numpy, which it brings) come with ``pip install 'gputop-train[report]'``."""

from __future__ import annotations


class MissingPlotting(RuntimeError):
    """matplotlib is not installed."""


def require() -> None:
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        raise MissingPlotting(
            "the report draws its charts with matplotlib, which is not installed: "
            "pip install 'gputop-train[report]' (or pip install matplotlib)"
        ) from None
