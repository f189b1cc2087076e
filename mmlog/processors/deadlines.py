"""Items kept until a monotonic time comes: a processor's held-back calls and muted connections."""

from __future__ import annotations

import heapq
import itertools
from typing import Iterator


class Deadlines(list):
    """A heap of (due, order, item): items come out in the order they fall due, ties in the order added.
    A list, so that the loop's `if deadlines:` on every pass costs what an empty list's test does."""

    __slots__ = ("_order",)

    def __init__(self) -> None:
        super().__init__()
        self._order = itertools.count()

    def add(self, due: float, item) -> None:
        heapq.heappush(self, (due, next(self._order), item))

    def next_due(self) -> float | None:
        """When the first item falls due; None when none is kept."""
        return self[0][0] if self else None

    def due(self, now: float) -> Iterator:
        """Take out, in order, the items due by now (one at a time: those added meanwhile count too)."""
        while self and self[0][0] <= now:
            yield heapq.heappop(self)[2]
