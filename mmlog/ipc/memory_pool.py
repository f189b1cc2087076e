"""The broker's request memory pool: `queued.max.request.bytes` shared by every processor, in one shared page.

The main process makes the pool before forking: a memfd holding a few int64 words
(bytes reserved in all, and per processor slot: bytes reserved, waiting flag),
mapped shared, plus one eventfd per slot. Processors reserve request bytes from
it as frames arrive and give them back when the request is done or its
connection closes; the supervisor gives back a dead processor's whole share
(`reclaim`), so a crash leaks nothing.

Two rules decide a reservation (`reserve(slot, grow, fund)`), and together they
guarantee progress:

- *grow*: bytes for a frame that may still be only partly received are granted
  only while at least `floor` (socket.request.max.bytes, the largest frame) stays
  free afterwards;
- *fund*: bytes that complete a frame's reservation (all it can still need) are
  granted while they fit at all.

Grown bytes never eat into the last `floor` bytes. A funded frame has all the
memory it will ever need: once its sender has sent it, it is handled and
released. So when every funded frame has been released, at least `floor` is
free, which funds any one waiting frame (no frame needs more than `floor`): the
pool never deadlocks on frames that each hold part of what they need. (Kafka
reserves a frame's whole declared size as soon as its size prefix arrives: the
same guarantee, but twenty sockets that declare 100 MiB and send nothing take
2 GiB of its pool; here they take nothing beyond their staging buffers.)

A reservation that fails marks its slot waiting; the next release wakes every
waiting slot's eventfd and clears its flag, all under the lock, so a processor
that failed cannot miss the release that would have let it in.

The lock is a POSIX record lock (`lockf`) on the memfd: one per process, released
by the kernel if its holder dies, so a processor killed inside the critical
section cannot wedge the others. Only one thread of a process may use the pool
(the processors' loops are single-threaded; in the main process only the
supervisor calls `reclaim`). Each call is two `fcntl` calls and a few word
updates; processors take the lock a chunk at a time, not per request
(`processors/memory.py`).
"""

from __future__ import annotations

import fcntl
import mmap
import os

_TOTAL, _WAITING = 0, 1  # words before the per-slot ones
_HEADER = 2


class MemoryPool:
    """Request bytes reserved by all processors, bounded by `limit`, with `floor` kept for funded frames."""

    def __init__(self, limit: int, floor: int, slots: int) -> None:
        if not 0 <= floor <= limit:
            raise ValueError(f"floor {floor} must be between 0 and the limit {limit}")
        self.limit = limit
        self.floor = floor
        self.slots = slots
        self._fd = os.memfd_create("mmlog-memory-pool", os.MFD_CLOEXEC)
        size = max(mmap.PAGESIZE, 8 * (_HEADER + 2 * slots))
        os.ftruncate(self._fd, size)
        self._page = mmap.mmap(self._fd, size)  # MAP_SHARED: the same words in every forked processor
        self._words = memoryview(self._page).cast("q")
        self.fds = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(slots)]

    # ------------------------------------------------------------ reading

    @property
    def used(self) -> int:
        """Bytes reserved by every processor (a lock-free read: exact only between reservations)."""
        return self._words[_TOTAL]

    def used_by(self, slot: int) -> int:
        return self._words[_HEADER + slot]

    def waiting(self, slot: int) -> bool:
        return bool(self._words[_HEADER + self.slots + slot])

    # ------------------------------------------------------------ reserving and releasing

    def reserve(self, slot: int, grow: int, fund: int) -> int:
        """Reserve `grow` bytes if `floor` stays free after, else `fund` bytes if they fit; return what was
        reserved (`grow`, `fund` or 0). Either may be 0 to skip that rule. On 0 the slot is marked waiting,
        and its eventfd fires at the next release."""
        words = self._words
        self._lock()
        try:
            total = words[_TOTAL]
            if 0 < grow and total + grow <= self.limit - self.floor:
                got = grow
            elif 0 < fund and total + fund <= self.limit:
                got = fund
            else:
                flag = _HEADER + self.slots + slot
                if not words[flag]:
                    words[flag] = 1
                    words[_WAITING] += 1
                return 0
            words[_TOTAL] = total + got
            words[_HEADER + slot] += got
            return got
        finally:
            self._unlock()

    def release(self, slot: int, nbytes: int) -> None:
        """Give back bytes reserved by `slot`; wake the slots waiting for memory."""
        words = self._words
        self._lock()
        try:
            words[_TOTAL] -= nbytes
            words[_HEADER + slot] -= nbytes
            if words[_WAITING]:
                self._wake_waiting()
        finally:
            self._unlock()

    def reclaim(self, slot: int) -> int:
        """Give back everything a dead processor held (the main process, before replacing it); return it."""
        words = self._words
        self._lock()
        try:
            held = words[_HEADER + slot]
            words[_TOTAL] -= held
            words[_HEADER + slot] = 0
            flag = _HEADER + self.slots + slot
            if words[flag]:
                words[flag] = 0
                words[_WAITING] -= 1
            if words[_WAITING]:
                self._wake_waiting()
            return held
        finally:
            self._unlock()

    def drain(self, slot: int) -> None:
        """Consume the slot's wake-up (its eventfd polled readable)."""
        try:
            os.eventfd_read(self.fds[slot])
        except BlockingIOError:
            pass

    # ------------------------------------------------------------ internals

    def _wake_waiting(self) -> None:
        """Under the lock: clear every waiting flag and wake its slot."""
        words, base = self._words, _HEADER + self.slots
        for slot in range(self.slots):
            if words[base + slot]:
                words[base + slot] = 0
                try:
                    os.eventfd_write(self.fds[slot], 1)
                except BlockingIOError:
                    pass  # counter saturated: that processor is awake anyway
        words[_WAITING] = 0

    def _lock(self) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_EX)

    def _unlock(self) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_UN)
