"""Arms alternated ABBA (AB, BA, AB, ...), so that a drift of the machine slower than a pair
cancels: the one runner the cost benchmarks share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Arm = TypeVar("Arm")
Figure = TypeVar("Figure")


def abba_order(index: int, arms: Sequence[Arm]) -> tuple[Arm, ...]:
    """Round ``index``'s arms: as given on even rounds, reversed on odd ones."""
    return tuple(arms) if index % 2 == 0 else tuple(reversed(arms))


def abba_rounds(
    arms: Sequence[Arm], rounds: int, measure: Callable[[Arm, int], Figure]
) -> list[dict[Arm, Figure]]:
    """``measure(arm, round)`` for every arm of every round, in ABBA order; one dict a round,
    keyed by arm (in the order the arms ran)."""
    return [
        {arm: measure(arm, index) for arm in abba_order(index, arms)} for index in range(rounds)
    ]
