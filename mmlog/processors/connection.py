"""One client connection inside a processor: socket, framer, response queue.

Requests are handled one at a time per connection (`busy` from the moment a
request is taken until its response is queued), so responses leave in request
order, as Kafka's SocketServer guarantees by muting the channel. Buffering is
bounded: the framer rejects a frame above `socket.request.max.bytes` before
buffering its body, and a connection whose unsent responses exceed
`MAX_PENDING_OUT` is not read from until the client drains them.
"""

from __future__ import annotations

import socket
import time

from mmlog.processors.sendfile import OutQueue
from mmlog.protocol import FrameReader

MAX_PENDING_OUT = 8 << 20  # stop reading a client that does not read its responses
MAX_QUEUED_FRAMES = 64  # pipelined requests buffered before we stop reading


class Connection:
    """A client socket owned by this processor."""

    __slots__ = ("sock", "fd", "peer", "reader", "out", "busy", "closing", "last_active", "corked", "events",
                 "produce_shape")

    def __init__(self, sock: socket.socket, max_frame_size: int) -> None:
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
        self.reader = FrameReader(max_frame_size)
        self.out = OutQueue()
        self.busy = False
        self.closing = False
        self.corked = False
        self.last_active = time.monotonic()
        self.events = 0  # what the selector currently watches
        self.produce_shape = None  # the last one-partition Produce request's shape (handlers/produce.py)

    def wants_read(self) -> bool:
        return not self.closing and self.out.pending < MAX_PENDING_OUT and self.reader.queued < MAX_QUEUED_FRAMES

    def has_queued_requests(self) -> bool:
        return self.reader.queued > 0

    def fill(self) -> bool:
        """Receive what the socket has into the framer; False when the peer closed or failed.

        Raises the framer's FrameSizeError on an oversize or negative length prefix.
        """
        reader = self.reader
        try:
            while True:
                buf = reader.get_buffer()
                n = self.sock.recv_into(buf)
                if n == 0:
                    return False
                reader.buffer_updated(n)
                if n < len(buf):
                    break
        except BlockingIOError:
            pass
        except (ConnectionError, TimeoutError):
            return False
        self.last_active = time.monotonic()
        return True

    def next_request(self):
        """The next whole request frame, unless one is already in flight."""
        if self.busy or self.closing:
            return None
        frame = self.reader.next_frame()
        if frame is not None:
            self.busy = True
        return frame

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
        return taken

    def queue(self, parts, has_files: bool = False) -> None:
        """Queue a response's parts and free the connection for its next request."""
        if has_files and not self.corked:
            self._cork(True)
        self.out.push(parts)
        self.busy = False

    def done(self) -> None:
        """The request needs no response (Produce with acks=0)."""
        self.busy = False

    def flush(self) -> bool:
        """Write queued output; True when all is written. OSError if the peer is gone.

        The cork set when a response with file ranges was queued (so its header chunks
        and file ranges leave in full segments) comes off after the first attempt,
        finished or not: a response still queued waits on the peer's window anyway.
        """
        try:
            return self.out.write(self.sock)
        finally:
            if self.corked:
                self._cork(False)

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
        try:
            self.sock.close()
        except OSError:
            pass
