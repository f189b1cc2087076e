"""One client connection inside a processor: socket, framer, response queue.

Requests are handled one at a time per connection (`busy` from the moment a
request is taken until its response is queued), so responses leave in request
order, as Kafka's SocketServer guarantees by muting the channel. Buffering is
bounded: the framer rejects a frame above `socket.request.max.bytes` before
buffering its body, and a connection whose unsent responses exceed
`MAX_PENDING_OUT` is not read from until the client drains them.

Request memory: the framer reserves every frame's bytes from the connection's
budget (processors/memory.py) as they arrive, and a connection whose budget
refuses is not read from (`starved`) until the processor finds memory for it.
The connection gives a frame's bytes back when its request is done (response
queued, or none due), and everything it holds when it closes.

Security: a connection knows the listener it came in on (its name,
for Metadata's answer, and its protocol). On an SSL or SASL_SSL listener the socket
is an `ssl.SSLSocket` that starts `handshaking`: the worker steps the handshake on
each readiness event (`handshake`), watching whatever OpenSSL wants next, so a slow
handshake never blocks other connections. A TLS socket may hold decrypted bytes
that epoll cannot see, so `fill` reads until OpenSSL wants more from the network.
`principal` is `User:<name>` after SASL, `User:<certificate DN>` after mutual TLS,
else `User:ANONYMOUS`. The authoriser caches its decisions for it in `acl_cache`
(security/authorizer.py).

Request timing (the phases of ipc/metrics_block.py) costs no clock read per frame: each
read that completes frames stamps them with one monotonic time (`_stamps`: how many frames
had been completed by then, and when), and a frame taken learns its time from there
(`arrivals`). A response to be counted leaves a mark (`sending`: where its bytes end in
the output stream, and its request's times) that `flush` counts once the bytes before it
are written, sendfile ranges included; a connection closed first counts none of them.

A client quota's throttle (processors/quotas.py) mutes the connection until
`throttled_until`: it is neither read nor are its queued requests handled, while
its responses still go out (the worker unmutes it).
"""

from __future__ import annotations

import selectors
import socket
import ssl
import time
from collections import deque

from mmlog.ipc.metrics_block import NULL_REGION
from mmlog.processors.sendfile import OutQueue
from mmlog.protocol import FrameReader
from mmlog.security.tls import ktls_active, principal_of

MAX_PENDING_OUT = 8 << 20  # stop reading a client that does not read its responses
MAX_QUEUED_FRAMES = 64  # pipelined requests buffered before we stop reading
_PEER_GONE = (7, 8)  # TCP_CLOSE (reset), TCP_CLOSE_WAIT (the peer sent FIN): tcpi_state in linux/tcp.h


UNKNOWN = object()  # a client id not seen yet (None is a null client id)


class Connection:
    """A client socket owned by this processor."""

    __slots__ = ("sock", "fd", "peer", "reader", "out", "busy", "closing", "last_active", "corked", "events",
                 "produce_shape", "budget", "in_flight", "ticket", "listener_name", "handshaking", "tls_wants",
                 "tls", "sasl", "principal", "throttled_until", "acl_cache", "_stamps", "_taken", "arrivals",
                 "sending", "client_id")

    def __init__(self, sock: socket.socket, max_frame_size: int, budget=None, ticket: int = -1,
                 listener_name: str | None = None, sasl=None) -> None:
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # a Unix socket in tests
        self.sock = sock
        self.fd = sock.fileno()
        try:
            self.peer = sock.getpeername()
        except OSError:
            self.peer = None
        self.budget = budget
        self.reader = FrameReader(max_frame_size, budget=budget)
        self.in_flight = 0  # bytes of the frames taken and not yet answered
        self.ticket = ticket  # its entry in the broker's connection table (ipc/connection_table.py)
        self.out = OutQueue()
        self.busy = False
        self.closing = False
        self.corked = False
        self.last_active = time.monotonic()
        self.events = 0  # what the selector currently watches
        self.produce_shape = None  # the last one-partition Produce request's shape (handlers/produce.py)
        self.throttled_until = 0.0  # muted by a client quota until then (monotonic s; processors/quotas.py)
        self._stamps: deque = deque()  # (frames completed so far, monotonic s of the read that completed them)
        self._taken = 0  # frames taken so far
        self.arrivals: list[float] = []  # when the frames taken since the last next_request were complete
        self.sending: deque = deque()  # responses to count once written: (end, api, count, and their times)
        self.listener_name = listener_name
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.handshaking = self.tls
        self.tls_wants = selectors.EVENT_READ  # what the handshake waits for
        self.sasl = sasl  # a processors.sasl.SaslSession on SASL listeners
        self.principal = "User:ANONYMOUS"
        self.acl_cache = None  # (ACL generation, {(operation, resource type, name): allowed}): authorizer.py
        self.client_id = UNKNOWN  # the client id of its last Produce or Fetch the compiled path handed over

    def handshake(self) -> bool:
        """Step the TLS handshake; True once done. ssl.SSLError (an untrusted or expired certificate, a
        plaintext client) when it fails."""
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.tls_wants = selectors.EVENT_READ
            return False
        except ssl.SSLWantWriteError:
            self.tls_wants = selectors.EVENT_WRITE
            return False
        self.handshaking = False
        self.last_active = time.monotonic()
        dn = principal_of(self.sock.getpeercert())
        if dn is not None and self.sasl is None:
            self.principal = f"User:{dn}"
        if ktls_active(self.sock):
            self.out.ktls = True
        return True

    def wants_read(self) -> bool:
        reader = self.reader
        return (not self.closing and self.out.pending < MAX_PENDING_OUT and reader.queued < MAX_QUEUED_FRAMES
                and not reader.starved and not self.throttled_until)

    def has_queued_requests(self) -> bool:
        return self.reader.queued > 0

    def fill(self) -> bool:
        """Receive what the socket has into the framer; False when the peer closed or failed.

        Stops early, alive, when the framer is starved for memory. Raises the framer's
        FrameSizeError on an oversize or negative length prefix.
        """
        reader = self.reader
        try:
            while True:
                buf = reader.get_buffer()
                if buf is None:
                    break  # starved: recv_into an empty buffer would read as EOF
                n = self.sock.recv_into(buf)
                if n == 0:
                    return False
                reader.buffer_updated(n)
                if n < len(buf) and not self.tls:
                    break  # a TLS socket reads on: OpenSSL may hold more than the kernel shows epoll
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (ConnectionError, TimeoutError, ssl.SSLError):
            return False
        self.stamp(time.monotonic())
        return True

    def stamp(self, now: float) -> None:
        """Frames completed since the last stamp were complete at `now` (after a read, or a starved reader's
        resume); counts as activity for connections.max.idle.ms."""
        self.last_active = now
        completed = self._taken + self.reader.queued
        stamps = self._stamps
        if completed > (stamps[-1][0] if stamps else self._taken):
            stamps.append((completed, now))

    def _arrival(self) -> float:
        """When the next frame to be taken was complete; counts it taken."""
        k = self._taken
        self._taken = k + 1
        stamps = self._stamps
        while stamps and stamps[0][0] <= k:
            stamps.popleft()
        return stamps[0][1] if stamps else self.last_active

    def peer_gone(self) -> bool:
        """True if the peer closed or reset while we were not reading (a starved connection is not polled
        for input, so its EOF would otherwise go unseen): the TCP state, one getsockopt."""
        try:
            state = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        except OSError:
            return False  # not TCP (a Unix socket in tests)
        return state in _PEER_GONE

    def next_request(self):
        """The next whole request frame, unless one is already in flight (or a quota mutes the connection)."""
        if self.busy or self.closing or self.throttled_until:
            return None
        frame = self.reader.next_frame()
        if frame is not None:
            self.busy = True
            self.in_flight += len(frame)
            self.arrivals = [self._arrival()]
        return frame

    def hold(self, arrived: float, count: int = 1) -> None:
        """Requests the compiled path took whose answers Python gives (their frames never were the framer's):
        in flight from now, as those from next_request and take_queued are."""
        self.busy = True
        self.arrivals = [arrived] * count

    def take_queued(self, accept, limit: int) -> list:
        """With a request in hand: take up to `limit` more queued frames, while accept(frame) holds
        (pipelined requests handled together; their responses must still be queued in order)."""
        reader = self.reader
        taken = []
        while len(taken) < limit:
            frame = reader.peek()
            if frame is None or not accept(frame):
                break
            taken.append(reader.next_frame())
            self.in_flight += len(frame)
            self.arrivals.append(self._arrival())
        return taken

    def queue(self, parts, has_files: bool = False) -> None:
        """Queue a response's parts and free the connection for its next request."""
        if has_files and not self.corked:
            self._cork(True)
        self.out.push(parts)
        self.busy = False
        self._release_in_flight()

    def done(self) -> None:
        """The request needs no response (Produce with acks=0)."""
        self.busy = False
        self._release_in_flight()

    def _release_in_flight(self) -> None:
        # A group of pipelined requests (dispatch.handle_produce_group) is handled as one: its
        # first answer comes after every frame of the group was used, and gives them all back.
        if self.in_flight and self.budget is not None:
            self.budget.release(self.in_flight)
        self.in_flight = 0

    def flush(self, metrics=NULL_REGION) -> bool:
        """Write queued output; True when all is written. OSError if the peer is gone.

        The cork set when a response with file ranges was queued (so its header chunks
        and file ranges leave in full segments) comes off after the first attempt,
        finished or not: a response still queued waits on the peer's window anyway.
        Sending counts as activity for connections.max.idle.ms, as receiving does: a
        consumer whose long poll outlasted the idle time is not closed as it is answered.
        Responses marked `sending` that are now written whole count their send time in `metrics`.
        """
        self.last_active = time.monotonic()
        try:
            return self.out.write(self.sock)
        finally:
            if self.corked:
                self._cork(False)
            if self.sending:
                self._count_sent(metrics)

    def mark_sending(self, api: int, count: int, arrived: float, received: float, handled: float,
                     answered: float) -> None:
        """The response just queued (to `count` requests of `api`, with these times) counts them in the
        metrics once it is written whole."""
        self.sending.append((self.out.pushed, api, count, arrived, received, handled, answered))

    def _count_sent(self, metrics) -> None:
        sending, written = self.sending, self.out.written
        if sending[0][0] > written:
            return
        now = time.monotonic()
        while sending and sending[0][0] <= written:
            _, api, count, arrived, received, handled, answered = sending.popleft()
            metrics.request(api, count, arrived, received, handled, answered, now)

    def _cork(self, on: bool) -> None:
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, int(on))
        except OSError:
            pass
        self.corked = on

    def close(self) -> None:
        # A deferred response (a JoinGroup answered after the client left) then finds the connection
        # closing and is dropped, instead of being written to whatever socket reuses the fd.
        self.closing = True
        self._release_in_flight()
        self.reader.discard()
        try:
            self.sock.close()
        except OSError:
            pass
