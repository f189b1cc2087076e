"""The acceptor's core: accepting connections on the listeners and handing each to a processor.

The accept path never touches disk or ZooKeeper: it checks max.connections and
max.connections.per.ip (`connection_limits.py`), closing a connection over either at once
(and saying so in the log, a line a second at most), and hands the others off round-robin
to the live processors (`handoff.py`): one that is backed up or gone is skipped for the
next. When every processor is backed up (a burst of thousands of connects), the connection
waits in the acceptor's `waiting` queue and accepting stops, so the rest wait in the kernel's
listen backlog, as Kafka's acceptor blocks on a full processor queue; the supervisor's loop
retries within milliseconds (`retry`). Only a connection no processor has taken for
HANDOFF_WAIT_S is closed. The supervisor's loop (supervisor.py) calls `accept` whenever a
listener is readable.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections import deque
from typing import Callable, Iterable, Protocol

from mmlog.acceptor.connection_limits import ConnectionLimits
from mmlog.acceptor.handoff import hand_off

log = logging.getLogger("mmlog.broker")

HANDOFF_WAIT_S = 10.0  # how long an accepted connection may wait for a processor to take it


class Processor(Protocol):
    """What the accept loop needs of a live processor: its slot and the socket that takes connections."""

    slot: int
    handoff: socket.socket


class AcceptLoop:
    """Accepts connections, refuses those over a limit, hands the others to the processors in turn."""

    def __init__(self, limits: ConnectionLimits, processors: Callable[[], Iterable[Processor]]) -> None:
        """`processors` gives the live processors at the moment of a hand-off (the supervisor replaces them)."""
        self.limits = limits
        self.processors = processors
        self._next = 0
        self._next_refusal_log = 0.0
        self.waiting: deque = deque()  # (conn, ticket, listener index, deadline): accepted, no processor took it

    def accept(self, listener: socket.socket, index: int = 0) -> None:
        """Accept every pending connection; close those over a limit, hand the others to the next processor."""
        while not self.retry():
            try:
                conn, address = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accept: %s", exc.strerror)
                    return
                raise
            ticket = self.limits.admit(address[0])
            if ticket is None:
                conn.close()
                self._log_refusal(address[0])
                continue
            if not self._hand_to_processor(conn, ticket, index):
                self.waiting.append((conn, ticket, index, time.monotonic() + HANDOFF_WAIT_S))

    def retry(self) -> bool:
        """Hand off the connections waiting, oldest first; True while some still wait (accept no more)."""
        while self.waiting:
            conn, ticket, index, deadline = self.waiting[0]
            if not self._hand_to_processor(conn, ticket, index):
                if time.monotonic() < deadline:
                    return True
                log.warning("no processor took a connection for %.0f s: closed", HANDOFF_WAIT_S)
                conn.close()
                self.limits.forget(ticket)
            self.waiting.popleft()
        return False

    def _hand_to_processor(self, conn: socket.socket, ticket: int, index: int = 0) -> bool:
        """`index`: the listener's place in the broker's listeners, which tells the processor its name.
        False when every processor is backed up or gone (conn stays open, ours)."""
        workers = sorted(self.processors(), key=lambda w: w.slot)
        for _ in range(len(workers)):
            worker = workers[self._next % len(workers)]
            self._next += 1
            try:
                hand_off(worker.handoff, conn, ticket, index)
            except OSError:
                continue  # that processor is backed up or gone: try the next
            self.limits.handed(ticket, worker.slot)
            return True
        return False

    def close_waiting(self) -> None:
        """At shutdown: the connections no processor took."""
        while self.waiting:
            conn, ticket, _, _ = self.waiting.popleft()
            conn.close()
            self.limits.forget(ticket)

    def _log_refusal(self, ip: str) -> None:
        """One line a second at most: a client hammering a limit must not flood the log."""
        now = time.monotonic()
        if now >= self._next_refusal_log:
            self._next_refusal_log = now + 1.0
            limit = self.limits.overrides.get(ip, self.limits.per_ip)
            log.info("refused a connection from %s: %d open from it (max.connections.per.ip %d), %d in all "
                     "(max.connections %d); %d refused so far", ip, self.limits.by_ip.get(ip, 0), limit,
                     self.limits.open, self.limits.max_total, self.limits.refused)
