"""A DataLoader setting changed within the running epoch, with no sample lost or seen twice.

The loop holds the epoch's iterator (``for batch in loader``), so the change cannot hand it a
new one. Instead the old iterator stops taking indices (its sampler iterator is emptied), the
batches it already sent to its workers drain first, and a new iterator with the new settings
serves the indices the sampler had still to give, in the order it would have given them. The
patched ``__next__`` (patches.py) asks ``take_next`` before the iterator's own ``__next__``.
The loader's own settings change too, so the next epoch starts with them.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import Any

# Iterators taken over by a handover: patches.py looks each batch up here (a dict miss).
_handovers: weakref.WeakKeyDictionary[Any, Handover] = weakref.WeakKeyDictionary()

# The loader settings a handover can change, and what DataLoader calls them.
LOADER_SETTINGS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


def active(iterator: Any) -> Handover | None:
    """The handover serving ``iterator``, if one took it over."""
    return _handovers.get(iterator) if _handovers else None


class Handover:
    """Serves the rest of one epoch: each iterator's batches in flight, oldest first, then the
    newest one's (a second change within the epoch hands over the first one's rest)."""

    def __init__(self, old: Any, next_of: Callable[[Any], Any], loader: Any) -> None:
        self.chain: list[Any] = [old]  # the loop's iterator, then each new one
        self._next_of = next_of  # the iterators' own __next__ (not the patched one)
        self._loader = weakref.ref(loader)

    def take_next(self) -> Any:
        """The next batch of the epoch; StopIteration at its end."""
        while self.chain:
            try:
                return self._next_of(self.chain[0])
            except StopIteration:
                self._retire(self.chain.pop(0))
        raise StopIteration

    def _retire(self, drained: Any) -> None:
        shutdown = getattr(drained, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()  # a persistent iterator keeps its workers past StopIteration
        loader = self._loader()
        if loader is not None and getattr(loader, "_iterator", None) is drained:
            loader._iterator = None  # the next epoch builds one with the new settings


def hand_over(
    torch_module: Any, loader: Any, iterator: Any, settings: dict[str, Any], next_of: Any
) -> None:
    """Change ``settings`` of ``loader`` now: the rest of ``iterator``'s epoch is served by a
    new iterator that has them. Raises ValueError (nothing changed) where it cannot."""
    data = torch_module.utils.data
    if isinstance(loader.dataset, data.IterableDataset):
        raise ValueError("an IterableDataset has no sampler indices to hand to a new iterator")
    handover = active(iterator)
    # After an earlier change in this epoch, the newest iterator holds the sampler's rest.
    source = handover.chain[-1] if handover is not None and handover.chain else iterator
    sampler_iter = getattr(source, "_sampler_iter", None)
    if sampler_iter is None:
        raise ValueError("the DataLoader iterator has no sampler iterator (not a torch iterator)")
    try:
        left = len(loader)
    except TypeError as error:
        raise ValueError("the sampler has no length: its rest cannot be taken") from error
    final = _settings_after(loader, settings)
    remaining = list(itertools.islice(sampler_iter, left + 1))
    # The new iterator starts its workers now, while the old one's batches in flight drain.
    try:
        rest = _loader_for(data, loader, remaining, final)._get_iterator() if remaining else None
    except Exception:  # the old iterator goes on with every index it had
        source._sampler_iter = itertools.chain(remaining, sampler_iter)
        raise
    source._sampler_iter = iter(())  # takes no new index: what it sent drains first
    for name, value in final.items():
        object.__setattr__(loader, name, value)  # DataLoader refuses persistent_workers
    if handover is None:
        handover = _handovers[iterator] = Handover(iterator, next_of, loader)
    if rest is not None:
        handover.chain.append(rest)


def change_for_next_epoch(loader: Any, settings: dict[str, Any]) -> None:
    """Change ``settings`` of ``loader`` from its next epoch (no iterator running now)."""
    final = _settings_after(loader, settings)
    # A persistent iterator would carry the old settings on; the loop may still be draining
    # it, so it is only forgotten here (its workers stop when the loop lets it go).
    loader._iterator = None
    for name, value in final.items():
        object.__setattr__(loader, name, value)


def _settings_after(loader: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """The loader's settings once ``settings`` apply, checked as DataLoader checks them."""
    final = {name: getattr(loader, name, None) for name in LOADER_SETTINGS} | settings
    if final["num_workers"] == 0:
        if settings.get("persistent_workers"):
            raise ValueError("persistent_workers needs num_workers > 0")
        if settings.get("prefetch_factor") is not None:
            raise ValueError("prefetch_factor needs num_workers > 0")
        final["prefetch_factor"], final["persistent_workers"] = None, False
    elif final["prefetch_factor"] is None:
        final["prefetch_factor"] = 2  # DataLoader's default with workers
    return final


def _loader_for(data: Any, loader: Any, remaining: list[Any], final: dict[str, Any]) -> Any:
    """A DataLoader over the same dataset that yields exactly ``remaining`` (batches of
    indices, or single indices for a loader without automatic batching)."""
    common: dict[str, Any] = {
        "num_workers": final["num_workers"],
        "collate_fn": loader.collate_fn,
        "pin_memory": final["pin_memory"],
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "prefetch_factor": final["prefetch_factor"],
        "persistent_workers": False,  # lives for the rest of this epoch only
        "pin_memory_device": getattr(loader, "pin_memory_device", ""),
    }
    if getattr(loader, "in_order", True) is False:
        common["in_order"] = False
    if loader._auto_collation:
        return data.DataLoader(loader.dataset, batch_sampler=remaining, **common)
    return data.DataLoader(loader.dataset, batch_size=None, sampler=remaining, **common)
