"""Cross-process wake-ups for parked long-poll fetches, without busy polling.

The main process makes, before forking, one eventfd per processor slot and a
shared anonymous page with one counter per slot: how many fetches that processor
has parked. A processor that appends to any partition writes to the eventfd of
every *other* slot whose counter is non-zero; the woken processor re-checks its
parked fetches against the partitions' high watermarks (a seqlocked read each).
Slots, eventfds and the page outlive processor restarts, so a replacement
processor inherits its slot's eventfd and everyone else's.

An eventfd is a counter: many appends before the waiter runs cost it one
wake-up, and a write never blocks (the counter cannot realistically overflow).

No wake-up is lost between a look and a park. A fetch that found nothing parks:
its processor stores the new count, then looks at the partitions again
(`Purgatory.park`). An appender publishes its records, then loads the counts.
This is Dekker's pattern: a full fence (`memory_fence.py`) sits between each
side's store and its load, so at least one of them sees the other's store. Either
the appender sees the count and writes the eventfd, or the second look sees the
records. Without the second look, an append landing while the fetch was being
handled went unnoticed until the next append or the fetch's max_wait_ms.
"""

from __future__ import annotations

import mmap
import os

from mmlog.ipc import memory_fence


class WakeBoard:
    """Parked-fetch counters and eventfds for every processor slot."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._page = mmap.mmap(-1, max(4096, 8 * slots))  # MAP_SHARED | MAP_ANONYMOUS: shared across fork
        # A plain memoryview of int64 counts: every append reads them, and a Python loop
        # over a few of them costs ~0.2 us where np.flatnonzero costs ~2 us.
        self.parked = memoryview(self._page).cast("q")[:slots]
        self.fds = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(slots)]
        memory_fence.warm()

    def set_parked(self, slot: int, count: int) -> None:
        """Publish `slot`'s count of parked fetches; loads after this call see the partitions as of after it."""
        self.parked[slot] = count
        memory_fence.full_fence()

    def notify_others(self, slot: int) -> None:
        """An append happened in `slot` (published already): wake every other slot with parked fetches."""
        memory_fence.full_fence()  # the append's stores before the counts' loads
        for other, parked in enumerate(self.parked):
            if parked and other != slot:
                try:
                    os.eventfd_write(self.fds[other], 1)
                except BlockingIOError:
                    pass  # counter saturated: the waiter is awake anyway

    def drain(self, slot: int) -> None:
        try:
            os.eventfd_read(self.fds[slot])
        except BlockingIOError:
            pass
