"""Arms alternated ABBA (AB, BA, AB, ...), so that a drift of the machine slower than a pair
cancels: the one runner the cost benchmarks share, and their --rounds/--warmup/--measure."""

from __future__ import annotations

import argparse
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


def add_round_options(
    parser: argparse.ArgumentParser, rounds: int, warmup: float | None, measure: float | None
) -> None:
    """``--rounds`` (pairs, ABBA) and, where given a default, ``--warmup`` and ``--measure``
    (seconds left out and measured per run)."""
    parser.add_argument("--rounds", type=int, default=rounds, help="ABBA rounds (AB, BA, ...)")
    if warmup is not None:
        parser.add_argument("--warmup", type=float, default=warmup, help="seconds left out a run")
    if measure is not None:
        parser.add_argument("--measure", type=float, default=measure, help="seconds measured a run")
