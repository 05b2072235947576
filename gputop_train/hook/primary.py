"""Which optimizer's steps are the job's steps, and which thread trains: the agent counts one
optimizer on one thread (a GAN's second optimizer, a second training thread, a sweep's new
optimizer per trial are told apart here). Training thread only; no locks."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

# Steps in a row of another optimizer on the training thread, with none of the one we count,
# after which the loop has moved to it (a new optimizer per fold, sweep trial or epoch). A GAN's
# second optimizer steps once between two of the first: it never gets there.
PRIMARY_HANDOVER_STEPS = 3

# What ``PrimaryElection.elect`` says of an optimizer that stepped.
NOT_PRIMARY = 0  # another optimizer's step: not a step boundary
PRIMARY = 1  # the counted optimizer (the first one to step makes itself it)
TOOK_OVER = 2  # a new optimizer took over from the counted one: its model may differ


class PrimaryElection:
    """The counted optimizer and its thread; ``other_trainer`` once a second thread steps an
    optimizer of its own (its steps and batches are then left out)."""

    __slots__ = ("_successor", "optimizer", "other_trainer", "thread")

    def __init__(self) -> None:
        self.optimizer: weakref.ref[Any] | None = None  # the counted one (None: none yet)
        self.thread: int | None = None  # the thread whose optimizer steps we count
        self.other_trainer = False  # another thread steps an optimizer of its own too
        self._successor: tuple[int, int] | None = None  # (id, steps in a row) of a newer one

    def elect(self, optimizer: Any) -> int:
        """NOT_PRIMARY, PRIMARY or TOOK_OVER for an optimizer that just stepped. With several
        optimizers (GANs), the first one to step marks the step boundary; one that steps
        alone on the training thread for PRIMARY_HANDOVER_STEPS takes over."""
        primary = self.optimizer() if self.optimizer else None
        if primary is optimizer:
            self._successor = None
            return PRIMARY
        if primary is not None and not self._takes_over(optimizer):
            return NOT_PRIMARY
        moved = self.optimizer is not None
        self.optimizer = weakref.ref(optimizer)
        self.thread = threading.get_ident()
        self._successor = None
        return TOOK_OVER if moved else PRIMARY

    def on_primary_thread(self) -> bool:
        return self.thread is None or threading.get_ident() == self.thread

    def note_other_trainer(self) -> str:
        """A second thread stepped an optimizer of its own: from now on only the first is
        measured. The notice that says so."""
        self.other_trainer = True
        first = next((t.name for t in threading.enumerate() if t.ident == self.thread), "?")
        return (
            f"optimizers step on more than one thread: gputop-train measures thread {first!r} "
            f"(the first to step); the steps and batches of {threading.current_thread().name!r} "
            "and any other are left out"
        )

    def _takes_over(self, optimizer: Any) -> bool:
        """True once ``optimizer`` has stepped PRIMARY_HANDOVER_STEPS times in a row on the
        training thread without the counted one stepping in between."""
        if not self.on_primary_thread():
            return False
        key = id(optimizer)
        steps = self._successor[1] + 1 if self._successor and self._successor[0] == key else 1
        self._successor = (key, steps)
        return steps >= PRIMARY_HANDOVER_STEPS


class Elects(Protocol):
    """What ``primary_thread_only`` reads of the object whose handlers it gates (the agent)."""

    primary: PrimaryElection


Params = ParamSpec("Params")
Owner = TypeVar("Owner", bound=Elects)


def primary_thread_only(
    handler: Callable[Concatenate[Owner, Params], None],
) -> Callable[Concatenate[Owner, Params], None]:
    """The one gate for the training thread's events (a batch, an autocast, a backward, a
    count): once another thread steps an optimizer of its own, its events are not the
    measured loop's and are dropped here. While one thread trains, the gate is one attribute
    read (``other_trainer``) before the handler."""

    @functools.wraps(handler)
    def gated(owner: Owner, *args: Params.args, **kwargs: Params.kwargs) -> None:
        election = owner.primary
        if election.other_trainer and not election.on_primary_thread():
            return
        handler(owner, *args, **kwargs)

    return gated
