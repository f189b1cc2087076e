"""Parked long-poll fetches: answered when data arrives or their max_wait_ms ends.

A fetch that finds less than min_bytes parks here with two callbacks: `retry`
(re-read; returns True once it has answered) and `expire` (answer with what
there is). Appends in this processor retry at once; appends in other processors
reach us through the wake board's eventfd (`ipc/wake_board.py`). The deadline heap gives
the event loop its poll timeout, so nothing spins.

A retry or an expiry that raises is contained: that fetch's connection is closed
(`Request.fail`), and the other parked fetches go on.

Parking looks once more after the count is published (Kafka's tryCompleteElseWatch):
another processor's append made while the caller was looking saw no parked fetch
here and wrote no wake-up, and nothing else would answer before the deadline.
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Callable


class Purgatory:
    """The parked fetches of one processor."""

    def __init__(self, on_count: Callable[[int], None]) -> None:
        self._parked: dict[int, tuple] = {}  # id -> (request, retry, expire)
        self._deadlines: list[tuple[float, int]] = []
        self._ids = itertools.count()
        self._on_count = on_count

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, request, deadline: float, retry: Callable[[], bool], expire: Callable[[], None]) -> None:
        key = next(self._ids)
        self._parked[key] = (request, retry, expire)
        heapq.heappush(self._deadlines, (deadline, key))
        self._on_count(len(self._parked))
        if _guarded(request, retry):  # answered by the second look: appended meanwhile in another processor
            del self._parked[key]  # its deadline entry is skipped when it comes up
            self._on_count(len(self._parked))

    def timeout(self) -> float | None:
        """Seconds until the next deadline (None if nothing is parked)."""
        while self._deadlines and self._deadlines[0][1] not in self._parked:
            heapq.heappop(self._deadlines)
        if not self._deadlines:
            return None
        return max(0.0, self._deadlines[0][0] - time.monotonic())

    def wake(self) -> None:
        """Data arrived somewhere: let every parked fetch re-check."""
        for key, (request, retry, _) in list(self._parked.items()):
            if request.conn.closing or _guarded(request, retry):
                self._parked.pop(key, None)
        self._on_count(len(self._parked))

    def expire(self, everything: bool = False) -> None:
        """Answer the fetches whose max_wait_ms has passed (all of them when shutting down)."""
        if not self._deadlines:
            return  # every pass of the loop asks: nothing parked, nothing to tell the wake board
        now = float("inf") if everything else time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, key = heapq.heappop(self._deadlines)
            entry = self._parked.pop(key, None)
            if entry is not None and not entry[0].conn.closing:
                _guarded(entry[0], entry[2])
        self._on_count(len(self._parked))

    def drop_connection(self, conn) -> None:
        for key in [k for k, (req, _, _) in self._parked.items() if req.conn is conn]:
            del self._parked[key]
        self._on_count(len(self._parked))


def _guarded(request, fn) -> bool:
    """fn()'s answer; True (done with) if it raised, after closing the request's connection."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one fetch's failure must not reach the others or the loop
        request.fail(exc)
        return True
