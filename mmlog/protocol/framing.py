"""Sans-IO framing of Kafka's size-prefixed stream: bytes in, frame bodies out.

Every request and response is an int32 size N followed by N bytes. The reader
works like asyncio's BufferedProtocol: `get_buffer()` returns a writable
memoryview to ``recv_into``, `buffer_updated(n)` says how many bytes arrived,
and completed frames queue up for `next_frame()` / `pop_frames()`. `feed(data)`
does the same for bytes that are already in hand.

Memory and copies: small frames accumulate in one staging buffer (64 KiB by
default, so one ``recv`` can carry dozens of pipelined requests) and are copied
out once when complete. A frame that cannot fit in the staging buffer gets its
own buffer of exactly its size as soon as its length prefix is known; the bytes
already staged are moved there once and ``get_buffer()`` then points into it, so
a 100 MiB Produce is received in place with no re-copying. The length prefix is
checked (negative, or above ``max_frame_size``) before any of the body is
buffered; `FrameSizeError` then poisons the reader, since the stream has no
recoverable boundary left. Frames completed before the bad prefix stay queued.
"""

from __future__ import annotations

import struct
from collections import deque

from .errors import FrameSizeError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_BUFFER_SIZE = 64 * 1024
MIN_RECV = 4096  # compact the staging buffer rather than recv into less than this

_SIZE = struct.Struct(">i")


class FrameReader:
    """Split a byte stream into frame bodies (without their 4-byte size prefix)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        if buffer_size < 16:
            raise ValueError("buffer_size must be at least 16 bytes")
        self.max_frame_size = max_frame_size
        self._staging = bytearray(buffer_size)
        self._view = memoryview(self._staging)
        self._min_recv = min(MIN_RECV, buffer_size // 4)
        self._start = 0  # first byte of the frame being assembled in staging
        self._end = 0  # end of the bytes received into staging
        self._body: bytearray | None = None  # own buffer of a frame too big for staging
        self._filled = 0  # bytes of _body received so far
        self._frames: deque[memoryview] = deque()
        self._error: FrameSizeError | None = None

    # --- input -----------------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Return a writable memoryview for the next bytes (for ``sock.recv_into``)."""
        if self._error is not None:
            raise self._error
        if self._body is not None:
            return memoryview(self._body)[self._filled:]
        if len(self._staging) - self._end < self._min_recv and self._start > 0:
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        """Account for ``nbytes`` written into the last `get_buffer()`; queue whole frames."""
        if self._body is not None:
            self._filled += nbytes
            if self._filled == len(self._body):
                self._frames.append(memoryview(self._body))
                self._body = None
            return
        self._end += nbytes
        self._parse()

    def feed(self, data) -> None:
        """Copy bytes already received into the reader; queue whole frames."""
        view = memoryview(data).cast("B")
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    # --- output ----------------------------------------------------------------------

    def next_frame(self) -> memoryview | None:
        """Return the oldest complete frame body, or None."""
        return self._frames.popleft() if self._frames else None

    def peek(self) -> memoryview | None:
        """Return the oldest complete frame body without taking it, or None."""
        return self._frames[0] if self._frames else None

    def pop_frames(self) -> list[memoryview]:
        """Return every complete frame body, oldest first."""
        frames = list(self._frames)
        self._frames.clear()
        return frames

    @property
    def queued(self) -> int:
        """How many complete frames wait to be taken."""
        return len(self._frames)

    @property
    def partial(self) -> bool:
        """True while part of a frame is buffered (EOF now would cut a frame)."""
        return self._body is not None or self._end > self._start

    # --- internals ---------------------------------------------------------------------

    def _parse(self) -> None:
        """Queue every complete frame in staging; move a too-big frame to its own buffer."""
        staging, start, end = self._staging, self._start, self._end
        while end - start >= 4:
            size = _SIZE.unpack_from(staging, start)[0]
            if not 0 <= size <= self.max_frame_size:
                self._start = start
                self._error = FrameSizeError(size, self.max_frame_size)
                raise self._error
            if end - start - 4 >= size:
                self._frames.append(memoryview(bytearray(self._view[start + 4:start + 4 + size])))
                start += 4 + size
            else:
                if 4 + size > len(staging):
                    start = self._start_own_buffer(start, end, size)
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _start_own_buffer(self, start: int, end: int, size: int) -> int:
        """Give a frame too big for staging its own buffer; return the new staging start."""
        self._body = bytearray(size)
        self._filled = end - start - 4
        self._body[:self._filled] = self._view[start + 4:end]
        return end

    def _compact(self) -> None:
        """Move the partial frame to the start of staging (copies less than one frame)."""
        n = self._end - self._start
        self._staging[:n] = bytes(self._view[self._start:self._end])  # no overlapping memcpy
        self._start, self._end = 0, n
