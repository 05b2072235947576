"""Long series cut to a fixed number of time buckets, each keeping its mean and its extremes:
an hour of 8 ranks' steps draws as fast as a minute's, and a spike still shows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Buckets across the plot's width: a 1100-pixel plot gets about two pixels a bucket, the
# finest the eye separates (docs/recording.md, "report").
BUCKETS = 500


@dataclass(frozen=True)
class Buckets:
    """Per bucket: its centre time, and the mean, min and max of the values in it (NaN:
    an empty bucket, drawn as a gap)."""

    t: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def edges(start: float, end: float, buckets: int = BUCKETS) -> np.ndarray:
    return np.linspace(start, max(end, start + 1e-6), buckets + 1)


def _index(t: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(bounds, t, side="right") - 1, 0, len(bounds) - 2)


def extremes(t: np.ndarray, values: np.ndarray, bounds: np.ndarray) -> Buckets:
    """Mean, min and max of ``values`` (NaN: unmeasured, left out) per bucket of ``bounds``."""
    n = len(bounds) - 1
    known = ~np.isnan(values)
    t, values = t[known], values[known]
    index = _index(t, bounds)
    count = np.bincount(index, minlength=n)
    total = np.bincount(index, weights=values, minlength=n)
    low = np.full(n, np.inf)
    high = np.full(n, -np.inf)
    np.minimum.at(low, index, values)
    np.maximum.at(high, index, values)
    empty = count == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(empty, np.nan, total / np.maximum(count, 1))
    low[empty] = np.nan
    high[empty] = np.nan
    return Buckets((bounds[:-1] + bounds[1:]) / 2, mean, low, high)


def ratio(t: np.ndarray, top: np.ndarray, bottom: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per bucket, the sum of ``top`` over the sum of ``bottom`` (a rate or a share over the
    bucket, as the session's figures are sums over sums); NaN where nothing was measured."""
    n = len(bounds) - 1
    known = ~(np.isnan(top) | np.isnan(bottom))
    index = _index(t[known], bounds)
    upper = np.bincount(index, weights=top[known], minlength=n)
    lower = np.bincount(index, weights=bottom[known], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lower > 0, upper / lower, np.nan)
