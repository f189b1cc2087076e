"""Writing a response's parts to a non-blocking socket: bytes with send, file ranges with sendfile.

A response is a queue of parts: bytes-like chunks and `FileSlice`s. `OutQueue.write`
sends as much as the socket takes and remembers where it stopped, so a send that
would block resumes from the same byte later (`socket.sendfile` refuses
non-blocking sockets, hence `os.sendfile` with an explicit offset). Consecutive
byte chunks go out in one `sendmsg` (writev), and the socket is corked while a
response mixes chunks and file ranges, so a fetch of many small partitions still
leaves in full-sized TCP segments. A segment that cannot be read (EIO) takes its log
dir offline (`mmlog/log/log_dirs.py`) and closes the connection, as any failed write.

Over TLS (an `ssl.SSLSocket`) the kernel cannot encrypt what sendfile sends, unless
kernel TLS took the record layer (`ktls`, security/tls.py): then the plain path
above works unchanged on the socket's descriptor. Otherwise each write is one SSL
write of at most `TLS_WRITE` bytes: consecutive byte chunks joined (header pieces
of a few dozen bytes; one chunk alone goes as a memoryview, uncopied), and file
ranges read with `os.preadv` into a buffer the queue keeps. A read rather than an
mmap of the segment: a log truncated under a live mmap (a follower's truncation,
recovery) would kill the processor with SIGBUS, while a short read just fails the
connection like a shrunken file under sendfile. The copy costs little next to the
encryption it feeds (docs/security.md has the figures). An SSL write that would
block must be retried with the same bytes (OpenSSL's rule), so the pending buffer
stays until it is written whole.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections import deque
from itertools import islice

from mmlog.log import log_dirs

_MAX_IOV = 64
TLS_WRITE = 256 << 10  # bytes per SSL write: 16 TLS records, few calls, a bounded buffer per connection


class OutQueue:
    """Parts waiting to be written to one socket, in order."""

    def __init__(self) -> None:
        self._parts: deque = deque()
        self._sent = 0  # bytes of the first part already written
        self.pending = 0  # bytes queued and not yet written
        self.pushed = 0  # bytes ever queued: a response ends at the count after its push (send time)
        self.ktls = False  # the kernel encrypts: sendfile works on this TLS socket
        self._tls_out = None  # the SSL write in progress (retried with the same bytes)
        self._scratch: bytearray | None = None  # file bytes on their way into SSL writes

    def __bool__(self) -> bool:
        return bool(self._parts)

    def push(self, parts) -> None:
        for part in parts:
            n = len(part)
            if n:
                self._parts.append(part)
                self.pending += n
                self.pushed += n

    @property
    def written(self) -> int:
        """Bytes ever written (every response whose end is at or below this is on its way)."""
        return self.pushed - self.pending

    def write(self, sock: socket.socket) -> bool:
        """Write until done (True) or the socket would block (False). OSError on a dead peer."""
        if sock.__class__ is ssl.SSLSocket and not self.ktls:
            return self._write_tls(sock)
        parts = self._parts
        fd = sock.fileno()
        try:
            while parts:
                head = parts[0]
                if hasattr(head, "fileno"):
                    try:
                        n = os.sendfile(fd, head.fileno(), head.position + self._sent, head.size - self._sent)
                    except BlockingIOError:
                        raise
                    except OSError as exc:  # EIO reading the segment: its log dir goes offline
                        log_dirs.report_fd(head.fileno(), exc)
                        raise
                    if n == 0:
                        raise BrokenPipeError("sendfile wrote nothing: the file shrank or the peer left")
                else:
                    n = self._send_chunks(sock)
                self._advance(n)
        except BlockingIOError:
            return False
        return True

    def _write_tls(self, sock: ssl.SSLSocket) -> bool:
        try:
            while self._parts:
                if self._tls_out is None:
                    self._tls_out = self._next_tls_write()
                n = sock.send(self._tls_out)
                self._tls_out = None
                self._advance(n)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
            return False
        if self._scratch is not None and not self._parts:
            self._scratch = None  # an idle connection keeps no buffer
        return True

    def _next_tls_write(self):
        """The bytes of the next SSL write, from the head of the queue."""
        head = self._parts[0]
        if hasattr(head, "fileno"):
            size = min(head.size - self._sent, TLS_WRITE)
            if self._scratch is None:
                self._scratch = bytearray(TLS_WRITE)
            view = memoryview(self._scratch)[:size]
            try:
                got = os.preadv(head.fileno(), [view], head.position + self._sent)
            except OSError as exc:
                log_dirs.report_fd(head.fileno(), exc)
                raise
            if got < size:
                raise BrokenPipeError("segment read short: the file shrank")
            return view
        first = memoryview(head)[self._sent:]
        if len(self._parts) == 1 or len(first) >= TLS_WRITE or hasattr(self._parts[1], "fileno"):
            return first[:TLS_WRITE]
        chunks, size = [first], len(first)
        for part in islice(self._parts, 1, _MAX_IOV):
            if hasattr(part, "fileno") or size + len(part) > TLS_WRITE:
                break
            chunks.append(part)
            size += len(part)
        return b"".join(chunks)

    def _send_chunks(self, sock: socket.socket) -> int:
        chunks = []
        for i, part in enumerate(self._parts):
            if hasattr(part, "fileno") or i == _MAX_IOV:
                break
            chunks.append(memoryview(part)[self._sent :] if i == 0 else part)
        if self.ktls:
            return os.writev(sock.fileno(), chunks)  # the kernel encrypts; SSLSocket has no sendmsg
        return sock.sendmsg(chunks) if len(chunks) > 1 else sock.send(chunks[0])

    def _advance(self, n: int) -> None:
        """Drop the n bytes just written from the head of the queue."""
        self.pending -= n
        parts = self._parts
        if not self.pending:  # everything queued is written (the usual end of a flush)
            parts.clear()
            self._sent = 0
            return
        while n:
            left = len(parts[0]) - self._sent
            if n < left:
                self._sent += n
                return
            n -= left
            parts.popleft()
            self._sent = 0
