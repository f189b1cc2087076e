"""A processor's share of the request memory pool, and each connection's share of that.

`Allowance` stands between the processor's connections and the broker-wide
`MemoryPool` (ipc/memory_pool.py), whose every call takes a cross-process lock.
Small frames (those that fit the 64 KiB staging buffer: nearly every request)
are served from a local credit that is taken from the pool a chunk at a time
and handed back once more than two chunks sit unused, so a processor answering
tens of thousands of small requests a second takes the lock a few times a
second instead of twice per request. Big frames go to the pool at each growth
of their buffer (about log2(size / 128 KiB) times per frame) and back in one
piece. The credit is taken under the pool's *grow* rule (the last
socket.request.max.bytes stay free), so it never holds memory that a funded
frame needs; when the pool is past that point small frames are funded one by
one (counted in `pressure`, and given back first).

`ConnectionBudget` is the budget a connection's `FrameReader` draws on: it
caps what one connection may hold (frames arriving, queued, or being handled)
at `connection_limit(...)`, so one client cannot take the pool for itself.
"""

from __future__ import annotations

from mmlog.ipc.memory_pool import MemoryPool
from mmlog.protocol.framing import DEFAULT_BUFFER_SIZE

CHUNK = 1 << 20  # local credit taken from the pool at once


def connection_limit(max_frame: int, pool_limit: int) -> int:
    """What one connection may hold: the largest frame, or an eighth of the pool if that is more.

    At least one largest frame, or a connection could never receive one; beyond that an eighth
    of the pool leaves room to pipeline small requests when frames are capped far below the pool,
    and still takes at least eight connections to fill it (with the defaults, 100 MiB of 512 MiB:
    six connections).
    """
    return max(max_frame, pool_limit // 8)


class Allowance:
    """This processor's reservations in the pool, with a local credit for small frames."""

    def __init__(self, pool: MemoryPool, slot: int, small: int = DEFAULT_BUFFER_SIZE - 4) -> None:
        self.pool = pool
        self.slot = slot
        self.small = small  # a frame this size or smaller was staged whole: served from credit
        self.credit = 0  # reserved in the pool, not yet given to a frame
        self.pressure = 0  # small frames funded one by one outside the credit, still held
        self.releases = 0  # counts releases: a processor retries its starved connections when it moves

    def reserve(self, want: int, need: int) -> int:
        """Grant `want` (pool's grow rule) or `need` (fund rule; 0: not allowed), or 0 (the slot now waits)."""
        if need and need <= self.small and want == need:
            return self._reserve_small(need)
        return self.pool.reserve(self.slot, want, need)

    def release(self, nbytes: int) -> None:
        self.releases += 1
        if nbytes > self.small:
            self.pool.release(self.slot, nbytes)
            return
        back = min(nbytes, self.pressure)
        self.pressure -= back
        self.credit += nbytes - back
        if self.credit > 2 * CHUNK:
            back += self.credit - CHUNK
            self.credit = CHUNK
        if back:
            self.pool.release(self.slot, back)

    def _reserve_small(self, nbytes: int) -> int:
        if nbytes <= self.credit:
            self.credit -= nbytes
            return nbytes
        refill = nbytes - self.credit + CHUNK  # leaves a chunk of credit after this frame
        got = self.pool.reserve(self.slot, refill, nbytes)
        if got == refill:
            self.credit = CHUNK
            return nbytes
        self.pressure += got
        return got


class ConnectionBudget:
    """One connection's memory: what its reader may reserve, capped at `limit` bytes held at once."""

    __slots__ = ("allowance", "limit", "held")

    def __init__(self, allowance: Allowance, limit: int) -> None:
        self.allowance = allowance
        self.limit = limit
        self.held = 0

    def reserve(self, want: int, need: int) -> int:
        allowance = self.allowance
        if want == need and need <= allowance.credit and self.held + need <= self.limit:
            # The common case inlined (a small frame paid from credit: need <= credit <= 2 chunks, so
            # it is small): per request, a call less on each side is a third of the cost.
            allowance.credit -= need
            self.held += need
            return need
        room = self.limit - self.held
        if want > room:
            return 0  # waits for this connection's own requests to finish (the processor retries then)
        got = allowance.reserve(want, need if need <= room else 0)
        self.held += got
        return got

    def release(self, nbytes: int) -> None:
        allowance = self.allowance
        self.held -= nbytes
        if nbytes <= allowance.small and not allowance.pressure and allowance.credit <= CHUNK:
            allowance.credit += nbytes  # the common case inlined, as in reserve
            allowance.releases += 1
        elif nbytes:
            allowance.release(nbytes)


STARVED_BACKSTOP_S = 10.0  # retry starved connections at least this often, wake-up or not


class Starved:
    """A processor's starved connections: not read from until memory is found for them. They are
    retried after any release in this processor, when the pool's eventfd for this slot fired (`woken`),
    and every STARVED_BACKSTOP_S whatever happened, a backstop that should never be the one to resume one."""

    def __init__(self, memory: Allowance) -> None:
        self.conns: set = set()
        self.woken = False  # the pool's eventfd fired: another processor released memory
        self._memory = memory
        self._releases_seen = 0
        self._next_backstop = 0.0

    def retry(self, now: float) -> bool | None:
        """Whether to retry the starved connections now: None if not, else whether memory was signalled
        (False: the backstop's turn)."""
        if not self.conns:
            return None
        signalled = self.woken or self._memory.releases != self._releases_seen
        if not (signalled or now >= self._next_backstop):
            return None
        self.woken = False
        self._releases_seen = self._memory.releases
        self._next_backstop = now + STARVED_BACKSTOP_S
        return signalled
