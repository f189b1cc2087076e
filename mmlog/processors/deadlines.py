"""Items kept until a monotonic time comes: a processor's held-back calls and muted connections."""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class Deadlines(Generic[T]):
    """A heap of (due, order, item): items come out in the order they fall due, ties in the order added."""

    __slots__ = ("_heap", "_order")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()

    def add(self, due: float, item: T) -> None:
        heapq.heappush(self._heap, (due, next(self._order), item))

    def next_due(self) -> float | None:
        """When the first item falls due; None when none is kept."""
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Iterator[T]:
        """Take out, in order, the items due by now (one at a time: those added meanwhile count too)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            yield heapq.heappop(heap)[2]
