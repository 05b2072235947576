"""The DataLoader iterators that feed the current step: each one's data wait, batches,
samples and the loader facts of a new epoch; which loader fed the last step (the built-in
loader knobs act on it). Training thread only; no locks."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

from .. import wire
from .batch_size import describe_batch, infer_batch_size
from .code_sites import loader_site


class Feed:
    """One DataLoader iterator's share of the current step interval."""

    __slots__ = ("batches", "data_s", "exhausted_pass", "facts", "samples", "started", "thread")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.data_s = 0.0
        self.samples: int | None = None
        self.batches = 0
        self.started = False  # (re)started by DataLoader.__iter__ in this interval
        self.exhausted_pass = False  # started and run to StopIteration in this interval
        self.facts: wire.Loader | None = None  # loader facts of a new epoch, to publish


class Feeds:
    """The iterators active since the last optimizer step, by id(); ``seen`` once any
    DataLoader has fed the job (before that a step's data wait is unknown, not 0)."""

    __slots__ = ("_exhausted_iterator", "_feeds", "_loaders", "_train_iterator", "seen")

    def __init__(self) -> None:
        self._feeds: dict[int, Feed] = {}
        self.seen = False
        # The loader of each live iterator, and the iterator that fed the last batch.
        self._loaders: weakref.WeakKeyDictionary[Any, Callable[[], Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._train_iterator: weakref.ref[Any] | None = None
        self._exhausted_iterator: weakref.ref[Any] | None = None

    def started(self, seconds: float, loader: Any, iterator: Any) -> None:
        """An epoch's iterator was created (forking workers): time spent waiting for data."""
        self.seen = True
        feed = self._feed(iterator)
        feed.data_s += seconds
        feed.started, feed.exhausted_pass = True, False
        with contextlib.suppress(TypeError):  # an iterator that takes no weak reference
            self._loaders[iterator] = _holder(loader)
        feed.facts = wire.Loader(
            num_workers=getattr(loader, "num_workers", None),
            pin_memory=getattr(loader, "pin_memory", None),
            persistent_workers=getattr(loader, "persistent_workers", None),
            batch_size=getattr(loader, "batch_size", None),
            constructed_at=loader_site(loader),  # once per epoch, never per batch
        )

    def batch(self, seconds: float, batch: Any, iterator: Any) -> None:
        """A batch fetched after ``seconds`` of waiting."""
        self.seen = True
        feed = self._feed(iterator)
        feed.data_s += seconds
        feed.batches += 1
        if self._train_iterator is None or self._train_iterator() is not iterator:
            with contextlib.suppress(TypeError):
                self._train_iterator = weakref.ref(iterator)
        size = infer_batch_size(batch)
        if size is not None:
            feed.samples = (feed.samples or 0) + size
        if feed.facts is not None and feed.facts.dtype is None:
            feed.facts = describe_batch(batch, feed.facts)  # the epoch's first batch

    def exhausted(self, seconds: float, iterator: Any) -> None:
        """StopIteration: an iterator started in this interval has made a whole pass."""
        feed = self._feed(iterator)
        feed.data_s += seconds
        feed.exhausted_pass = feed.started
        with contextlib.suppress(TypeError):
            self._exhausted_iterator = weakref.ref(iterator)

    def take(self, publish: Callable[[wire.Frame], None]) -> tuple[float, int | None, int]:
        """The step's data wait, samples and batches from the iterators that fed it; a new
        epoch's loader facts go to ``publish`` once its first batch is described.

        An iterator started and run to its end within one step interval, beside another that
        also fetched, is an evaluation pass (a validation loop between two training steps):
        its time stays in the step's wall time but not in its data-wait or samples.
        """
        feeds = self._feeds
        evaluation = len(feeds) > 1
        data_s, samples, batches = 0.0, None, 0
        for feed in feeds.values():
            if evaluation and feed.exhausted_pass:
                continue
            data_s += feed.data_s
            batches += feed.batches
            if feed.samples is not None:
                samples = (samples or 0) + feed.samples
            if feed.facts is not None and feed.facts.dtype is not None:
                publish(feed.facts)
                feed.facts = None
        # The iterators that go on into the next interval, emptied (their epoch's facts kept
        # until its first batch).
        self._feeds = {}
        for key, feed in feeds.items():
            if not feed.exhausted_pass and (feed.batches or feed.started):
                following = self._feeds[key] = Feed()
                following.facts, following.thread = feed.facts, feed.thread
        return data_s, samples, batches

    def current(self) -> tuple[Any, Any]:
        """(the DataLoader that fed the last step, its iterator while the epoch runs)."""
        iterator = self._train_iterator() if self._train_iterator else None
        held = self._loaders.get(iterator) if iterator is not None else None
        loader = held() if held is not None else None
        exhausted = self._exhausted_iterator() if self._exhausted_iterator else None
        return loader, (iterator if iterator is not exhausted else None)

    def keep_thread(self, thread: int | None) -> None:
        """Another thread trains too: what it fetched is not this step's (only ``thread``'s
        iterators are kept)."""
        self._feeds = {k: f for k, f in self._feeds.items() if f.thread == thread}

    def _feed(self, iterator: Any) -> Feed:
        feed = self._feeds.get(id(iterator))
        if feed is None:
            feed = self._feeds[id(iterator)] = Feed()
        return feed


def _holder(loader: Any) -> Callable[[], Any]:
    """How an iterator's entry holds its loader. A persistent-workers loader holds its
    iterator, so a strong reference would keep the entry, and every replaced loader's worker
    processes, alive (57 workers after six changes on the H100): held weakly. Any other
    loader is held for as long as its iterator lives: ``iter(DataLoader(...))`` keeps only
    the iterator, and the built-in loader knobs need the loader."""
    if getattr(loader, "persistent_workers", False):
        return weakref.ref(loader)
    return lambda: loader
