"""A list that counts what a redraw reads of it."""

from __future__ import annotations

from collections.abc import Iterator


class CountingList(list):
    """A list that counts the items its reversed walks yield: what a redraw reads."""

    walked = 0

    def __reversed__(self) -> Iterator:
        for item in super().__reversed__():
            CountingList.walked += 1
            yield item
