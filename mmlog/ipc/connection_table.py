"""Which handed-off connections are still open: one shared byte per connection ticket.

The main process counts connections when it accepts them (max.connections,
max.connections.per.ip) and must stop counting each when the processor that
serves it closes it. The cheapest report that cannot be lost is a byte in
shared memory: the supervisor gives every connection it hands off a ticket (an
index in this table, sent along with the descriptor) and marks it OPEN; the
processor writes CLOSED there when it closes the connection (one store, no lock,
no message, no wake-up); the supervisor collects CLOSED tickets back to FREE
when it needs the counts exact (`closed_tickets`: one numpy scan of the tickets
in use). Each byte has one writer at a time: the supervisor while the ticket is
FREE or CLOSED, the processor while it is OPEN. A dead processor writes nothing:
the supervisor frees its tickets when it reaps it.

The table is an anonymous shared mapping made before the processors are forked;
pages are touched only as tickets are first used, so its capacity (up to a
million connections) costs nothing until then.
"""

from __future__ import annotations

import mmap
import struct

import numpy as np

FREE, OPEN, CLOSED = 0, 1, 2
MAX_CAPACITY = 1 << 20
TICKET = struct.Struct("<I")  # a ticket as the hand-off message carries it
HANDOFF = struct.Struct("<IB")  # the hand-off message: (ticket, index of the listener in `listeners`)


class ConnectionTable:
    """Open/closed marks of up to `capacity` connections, shared by the main process and the processors."""

    def __init__(self, capacity: int) -> None:
        self.capacity = min(capacity, MAX_CAPACITY)
        self._page = mmap.mmap(-1, max(mmap.PAGESIZE, self.capacity))  # MAP_SHARED | MAP_ANONYMOUS
        self.states = np.frombuffer(self._page, dtype=np.uint8, count=self.capacity)

    def opened(self, ticket: int) -> None:
        """The supervisor hands a connection off under this ticket."""
        self.states[ticket] = OPEN

    def closed(self, ticket: int) -> None:
        """The processor closed the connection of this ticket."""
        self.states[ticket] = CLOSED

    def closed_tickets(self, used: int) -> np.ndarray:
        """The tickets below `used` whose connections were closed since they were last collected."""
        return np.flatnonzero(self.states[:used] == CLOSED)

    def free(self, ticket: int) -> None:
        """The supervisor stopped counting this ticket's connection; the ticket may be reused."""
        self.states[ticket] = FREE
