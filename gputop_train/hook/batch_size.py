"""Infer how many samples a batch holds, without knowing the user's batch structure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Batches nest (tuple of (inputs, labels), dict of tensors, list of dicts); a few levels
# cover what DataLoaders yield in practice and keep the cost per batch tiny.
_MAX_DEPTH = 4


def infer_batch_size(batch: Any) -> int | None:
    """The leading dimension of the first tensor-like leaf, or None when there is none."""
    for _ in range(_MAX_DEPTH):
        shape = getattr(batch, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) else None
        if isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        elif isinstance(batch, Mapping) and batch:
            batch = next(iter(batch.values()))
        else:
            return None
    return None
