"""Writing a response's parts to a non-blocking socket: bytes with send, file ranges with sendfile.

A response is a queue of parts: bytes-like chunks and `FileSlice`s. `OutQueue.write`
sends as much as the socket takes and remembers where it stopped, so a send that
would block resumes from the same byte later (`socket.sendfile` refuses
non-blocking sockets, hence `os.sendfile` with an explicit offset). Consecutive
byte chunks go out in one `sendmsg` (writev), and the socket is corked while a
response mixes chunks and file ranges, so a fetch of many small partitions still
leaves in full-sized TCP segments. A segment that cannot be read (EIO) takes its log
dir offline (`mmlog/log/log_dirs.py`) and closes the connection, as any failed write.
"""

from __future__ import annotations

import os
import socket
from collections import deque

from mmlog.log import log_dirs

_MAX_IOV = 64


class OutQueue:
    """Parts waiting to be written to one socket, in order."""

    def __init__(self) -> None:
        self._parts: deque = deque()
        self._sent = 0  # bytes of the first part already written
        self.pending = 0  # bytes queued and not yet written

    def __bool__(self) -> bool:
        return bool(self._parts)

    def push(self, parts) -> None:
        for part in parts:
            n = len(part)
            if n:
                self._parts.append(part)
                self.pending += n

    def write(self, sock: socket.socket) -> bool:
        """Write until done (True) or the socket would block (False). OSError on a dead peer."""
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

    def _send_chunks(self, sock: socket.socket) -> int:
        chunks = []
        for i, part in enumerate(self._parts):
            if hasattr(part, "fileno") or i == _MAX_IOV:
                break
            chunks.append(memoryview(part)[self._sent :] if i == 0 else part)
        return sock.sendmsg(chunks) if len(chunks) > 1 else sock.send(chunks[0])

    def _advance(self, n: int) -> None:
        """Drop the n bytes just written from the head of the queue."""
        self.pending -= n
        parts = self._parts
        while n:
            left = len(parts[0]) - self._sent
            if n < left:
                self._sent += n
                return
            n -= left
            parts.popleft()
            self._sent = 0
