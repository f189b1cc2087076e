"""What the supervisor holds to fork: the control thread's locks, so no child starts mid-change.

The supervisor forks processors holding the topic lock, then the fork lock (control.py says who
holds them), so that no thread of the main process is half way through a change (a partition lock,
a half-written file) in the child's copy of memory. A fork waits for them at most WAIT_S: a long
topic creation, or a stalled control thread, puts a processor's restart off (ForkPutOff), never
the supervisor's loop.
"""

from __future__ import annotations

WAIT_S = 1.0  # a fork that cannot have the locks in this time is retried later


class ForkPutOff(Exception):
    """The locks a fork needs were not free in time."""


class ForkGuard:
    """The given locks, taken in order, each within WAIT_S (ForkPutOff if one is not had)."""

    def __init__(self, *locks) -> None:
        self.locks = locks

    def __enter__(self) -> None:
        taken = []
        for lock in self.locks:
            if not lock.acquire(timeout=WAIT_S):
                for held in reversed(taken):
                    held.release()
                raise ForkPutOff("the control thread's locks were not free")
            taken.append(lock)

    def __exit__(self, *exc) -> None:
        for lock in reversed(self.locks):
            lock.release()
