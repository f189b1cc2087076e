"""Processor heartbeats: one word per slot in a shared page, the time of its loop's last turn.

A processor whose loop stops turning (a request that never returns, a blocking call
with no deadline) keeps its connections and answers none of them. Each turn of a
processor's loop stores CLOCK_MONOTONIC (system-wide, so comparable between
processes) in its slot's word; the loop turns at least once a second when idle. The
supervisor reads the words and kills a processor that has not turned for
broker.stall.timeout.ms, which it then replaces as it replaces any dead one. The page
is made before forking and outlives processor restarts, like the wake board.
"""

from __future__ import annotations

import mmap
import time


class Heartbeats:
    """The last turn of every processor slot's loop, in nanoseconds of CLOCK_MONOTONIC."""

    def __init__(self, slots: int) -> None:
        self._page = mmap.mmap(-1, max(4096, 8 * slots))  # MAP_SHARED | MAP_ANONYMOUS: shared across fork
        self._beats = memoryview(self._page).cast("q")[:slots]

    def beat(self, slot: int) -> None:
        """The loop of `slot` turned now (an aligned 8-byte store: readers see it whole)."""
        self._beats[slot] = time.monotonic_ns()

    def quiet_s(self, slot: int, now_ns: int | None = None) -> float:
        """Seconds since `slot` last turned."""
        return ((time.monotonic_ns() if now_ns is None else now_ns) - self._beats[slot]) / 1e9

    def reset(self) -> None:
        """Every slot turned now (a new processor starting, or the whole broker resumed from a pause)."""
        now = time.monotonic_ns()
        for slot in range(len(self._beats)):
            self._beats[slot] = now
