"""A worker thread's queue, read so that the thread stays interruptible while it waits."""

from __future__ import annotations

import queue

IDLE_POLL_S = 1.0  # how often a thread waiting on a queue wakes, for an exception raised in it to land


def queue_items(jobs: queue.SimpleQueue, poll_s: float = IDLE_POLL_S):
    """The items put on a queue, until None; an idle thread reading it still wakes every poll_s, so that
    an exception raised in it asynchronously (`inject`) lands within that time, not at the next item."""
    while True:
        try:
            item = jobs.get(timeout=poll_s)
        except queue.Empty:
            continue
        if item is None:
            return
        yield item
