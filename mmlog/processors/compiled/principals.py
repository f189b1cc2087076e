"""The principals of a processor's connections as bits of the partition table's ACL decisions.

With an authoriser, compiled code serves a Produce (a Fetch) of a partition only where the partition's
row holds a decision for the connection's principal and host that allows WRITE (READ): one bit of the
row's decision fields per (principal, host) pair among the processor's connections (log/partition_table.py,
`permits`). The decisions are the authoriser's own (`Authorizer.allowed`, cached per connection as the
Python handlers ask it), entered when a request Python handles names the partition (path.py `_learn`), so
a refused topic stays the Python handlers' to answer. All are forgotten when the ACLs change (the
authoriser's generation, which the processor refreshes between compiled calls: no request is served on an
older decision than Python's own), and a pair's bit when its last connection closes. A connection finding
every bit taken is served by Python.
"""

from __future__ import annotations

from mmlog.log import partition_table as t
from mmlog.security.acls import READ, TOPIC, WRITE

MAX_BITS = 63  # int64 fields, the sign bit left alone
DECISIONS = [t.WRITE_KNOWN, t.WRITE_ALLOWED, t.READ_KNOWN, t.READ_ALLOWED]
KNOWN = {WRITE: t.WRITE_KNOWN, READ: t.READ_KNOWN}


class Principals:
    """Bits handed to (principal, host) pairs, counted by their connections."""

    def __init__(self, authorizer) -> None:
        self.authorizer = authorizer
        self.generation = authorizer.generation
        self._bits: dict[tuple, list[int]] = {}  # (principal, host) -> [bit, connections]
        self._of: dict[int, tuple] = {}  # fd -> its pair
        self._free = [1 << i for i in range(MAX_BITS)]

    def bit(self, conn) -> int | None:
        """conn's bit (0 without an authoriser), taken for its pair if it has none yet; None if none is left."""
        if not self.authorizer.enabled:
            return 0
        pair = (conn.principal, conn.peer[0] if isinstance(conn.peer, tuple) and conn.peer else "")
        held = self._of.get(conn.fd)
        if held == pair:
            return self._bits[pair][0]
        if held is not None:
            self.release(conn)
        entry = self._bits.get(pair)
        if entry is None:
            if not self._free:
                return None
            entry = self._bits[pair] = [self._free.pop(), 0]
        entry[1] += 1
        self._of[conn.fd] = pair
        return entry[0]

    def release(self, conn, rows=None) -> None:
        """conn no longer holds its pair's bit; the pair's last connection frees it (its decisions cleared in
        rows, the table's rows array, before the bit can be handed out again)."""
        pair = self._of.pop(conn.fd, None)
        if pair is None:
            return
        entry = self._bits[pair]
        entry[1] -= 1
        if entry[1] == 0:
            del self._bits[pair]
            if rows is not None:
                rows[:, DECISIONS] &= ~entry[0]
                self._free.append(entry[0])
            # else: never handed out again (a processor stopping)

    def refresh(self, rows) -> None:
        """Forget every decision if the ACLs changed since they were made."""
        if self.authorizer.generation != self.generation:
            rows[:, DECISIONS] = 0
            self.generation = self.authorizer.generation

    def learn(self, conn, rows, row: int, operation: int, topic: str) -> None:
        """Enter the authoriser's decision on `operation` of topic for conn's pair in the partition's row."""
        pair = self._of.get(conn.fd)
        if pair is None or self.authorizer.generation != self.generation:
            return
        bit = self._bits[pair][0]
        known = KNOWN[operation]
        if self.authorizer.allowed(conn, operation, TOPIC, topic):
            rows[row, known + 1] |= bit
        else:
            rows[row, known + 1] &= ~bit
        rows[row, known] |= bit
