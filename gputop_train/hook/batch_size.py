"""Infer how many samples a batch holds, without knowing the user's batch structure."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .. import wire

# Batches nest (tuple of (inputs, labels), dict of tensors, list of dicts); a few levels
# cover what DataLoaders yield in practice and keep the cost per batch tiny.
_MAX_DEPTH = 4


def first_leaf(batch: Any) -> Any:
    """The first tensor-like leaf of a batch (the inputs, by convention), or None."""
    for _ in range(_MAX_DEPTH):
        if getattr(batch, "shape", None) is not None:
            return batch
        if isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        elif isinstance(batch, Mapping) and batch:
            batch = next(iter(batch.values()))
        else:
            return None
    return None


def infer_batch_size(batch: Any) -> int | None:
    """The leading dimension of the first tensor-like leaf, or None when there is none."""
    leaf = first_leaf(batch)
    if leaf is None or not len(leaf.shape):
        return None
    return int(leaf.shape[0])


def describe_batch(batch: Any, loader: wire.Loader) -> wire.Loader:
    """``loader``'s facts with the dtype, shape, bytes and pinned-ness of a batch's inputs
    (what crosses PCIe); as they were (dtype unknown) for a batch without a tensor."""
    leaf = first_leaf(batch)
    if leaf is None:
        return loader
    size: int | None = None
    pinned: bool | None = None
    with contextlib.suppress(Exception):
        size = int(leaf.element_size() * leaf.nelement())
        pinned = bool(leaf.is_pinned())
    dtype, shape = str(getattr(leaf, "dtype", "")), list(leaf.shape)
    return replace(loader, dtype=dtype, shape=shape, bytes=size, pinned=pinned)
