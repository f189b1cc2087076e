"""Sans-IO framing of Kafka's size-prefixed stream: bytes in, frame bodies out.

Every request and response is an int32 size N followed by N bytes. The reader
works like asyncio's BufferedProtocol: `get_buffer()` returns a writable
memoryview to ``recv_into``, `buffer_updated(n)` says how many bytes arrived,
and completed frames queue up for `next_frame()` / `pop_frames()`. `feed(data)`
does the same for bytes that are already in hand.

Memory and copies: small frames accumulate in one staging buffer (64 KiB by
default, so one ``recv`` can carry dozens of pipelined requests) and are copied
out once when complete. The length prefix is checked (negative, or above
``max_frame_size``) before any of the body is buffered; `FrameSizeError` then
poisons the reader, since the stream has no recoverable boundary left. Frames
completed before the bad prefix stay queued.

A frame too big for the staging buffer gets a buffer of its own, in one of two ways:

- without a `budget` (a client reading its own broker's responses) it is
  allocated at its declared size as soon as the prefix is known, the staged bytes
  are moved there once and ``get_buffer()`` points into it: a 100 MiB response is
  received in place with no re-copying;
- with a `budget` (a broker reading untrusted clients) the declared size is only
  a promise: the frame stays in staging until staging is full, then moves to a
  buffer twice the staging size that doubles each time it fills, capped at the
  declared size. A peer that declares 100 MiB and sends 3 KiB costs its staging
  buffer and nothing more. The buffer grows in place (realloc: large buffers are
  remapped, not copied), so a view `get_buffer()` returned is valid only until
  the next call; a real 100 MiB frame costs about what it does unbudgeted
  (tools/bench_memory.py measures both).

The budget is asked (`reserve(want, need)`) before each allocation a frame's bytes
need: a complete small frame before it is copied out of staging (want = need =
its size), a big one before each growth (want = the growth, need = all it can
still need). It grants `want` or `need` bytes, or 0; on 0 the reader is `starved`:
`get_buffer()` returns None until `resume()` finds the memory. Every byte granted
is given back through `budget.release`: a frame's `len` once its consumer is done
with it (the reader does not know when), the rest by `discard()`.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Protocol

from .errors import FrameSizeError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_BUFFER_SIZE = 64 * 1024
MIN_RECV = 4096  # compact the staging buffer rather than recv into less than this

_SIZE = struct.Struct(">i")


class Budget(Protocol):
    """Where a budgeted reader's memory comes from (the broker's request memory pool)."""

    def reserve(self, want: int, need: int) -> int:
        """Grant `want` bytes, or `need` (all the frame can still need, >= want), or 0 (none now)."""

    def release(self, nbytes: int) -> None:
        """Take back bytes granted earlier."""


class FrameReader:
    """Split a byte stream into frame bodies (without their 4-byte size prefix)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 buffer_size: int = DEFAULT_BUFFER_SIZE, budget: Budget | None = None) -> None:
        if buffer_size < 16:
            raise ValueError("buffer_size must be at least 16 bytes")
        self.max_frame_size = max_frame_size
        self._staging = bytearray(buffer_size)
        self._view = memoryview(self._staging)
        self._min_recv = min(MIN_RECV, buffer_size // 4)
        self._budget = budget
        self._start = 0  # first byte of the frame being assembled in staging
        self._end = 0  # end of the bytes received into staging
        self._big = 0  # with a budget: the size of a frame too big for staging that is still staged
        self._body: bytearray | None = None  # own buffer of a frame too big for staging
        self._size = 0  # that frame's declared size
        self._filled = 0  # bytes of _body received so far
        self._reserved = 0  # bytes the budget granted for _body (>= len(_body))
        self._starved = False
        self._lent: memoryview | None = None  # the last view of _body that get_buffer returned (budgeted)
        self._frames: deque[memoryview] = deque()
        self._error: FrameSizeError | None = None
        self._kept = bytearray()  # bytes given to `keep` that the budget did not cover yet

    @property
    def empty(self) -> bool:
        """Nothing received and not yet taken: no whole frame queued, no part of one staged."""
        return (self._start == self._end and self._body is None and not self._frames and not self._big
                and not self._kept)

    # --- input -----------------------------------------------------------------------

    def get_buffer(self) -> memoryview | None:
        """Return a writable memoryview for the next bytes (for ``sock.recv_into``); None while `starved`."""
        if self._error is not None:
            raise self._error
        if self._starved:
            return None
        if self._body is not None:
            if self._filled == len(self._body) and not self._grow():
                return None
            return self._lend()
        if len(self._staging) - self._end < self._min_recv:
            if self._big:
                if not self._promote():
                    return None
                return self._lend()
            if self._start > 0:
                self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        """Account for ``nbytes`` written into the last `get_buffer()`; queue whole frames."""
        if self._body is not None:
            self._filled += nbytes
            if self._filled == self._size:  # then len(_body) == _size == _reserved (if budgeted)
                self._frames.append(memoryview(self._body))
                self._body = self._lent = None
                self._reserved = 0
            return
        self._end += nbytes
        self._parse()

    def feed(self, data) -> None:
        """Copy bytes already received into the reader; queue whole frames.

        With a budget, bytes that arrive while the reader is starved raise `BufferError`."""
        view = memoryview(data).cast("B")
        while view:
            target = self.get_buffer()
            if target is None:
                raise BufferError(f"{len(view)} bytes fed while starved for memory")
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def keep(self, data) -> None:
        """Bytes someone else already read from the socket (the compiled request path): framed as `feed`
        frames them, but never refused: what the budget does not cover yet stays here, unframed, and the
        reader is starved (not read from) until `resume` frames it."""
        view = memoryview(data).cast("B")
        while view:
            target = self.get_buffer()
            if target is None:
                self._kept += view
                self._starved = True
                return
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def resume(self) -> bool:
        """Retry the reservation the reader is starved on; True when it is no longer starved."""
        if not self._starved:
            return True
        self._starved = False
        if self._body is not None:
            self._grow()
        elif self._big:
            self._promote()
        else:
            self._parse()  # a complete small frame waits in staging
        if not self._starved and self._kept:
            kept, self._kept = self._kept, bytearray()
            self.keep(kept)
        return not self._starved

    def discard(self) -> None:
        """Drop every queued frame and partial one, giving their memory back (the connection closed)."""
        budget = self._budget
        if budget is not None:
            held = sum(map(len, self._frames)) + self._reserved
            if held:
                budget.release(held)
        self._frames.clear()
        self._body = self._lent = None
        self._reserved = self._filled = self._size = self._big = 0
        self._start = self._end = 0
        self._starved = False
        self._kept = bytearray()

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

    @property
    def starved(self) -> bool:
        """True while the budget refused what the next bytes need (call `resume()` when memory is back)."""
        return self._starved

    @property
    def held(self) -> int:
        """Bytes granted by the budget that the reader still holds (queued frames and a partial one)."""
        return sum(map(len, self._frames)) + self._reserved if self._budget is not None else 0

    # --- internals ---------------------------------------------------------------------

    def _parse(self) -> None:
        """Queue every complete frame in staging; note (or, unbudgeted, move out) a frame too big for it."""
        staging, start, end, budget = self._staging, self._start, self._end, self._budget
        self._big = 0
        while end - start >= 4:
            size = _SIZE.unpack_from(staging, start)[0]
            if not 0 <= size <= self.max_frame_size:
                self._start = start
                self._error = FrameSizeError(size, self.max_frame_size)
                raise self._error
            if end - start - 4 >= size:
                if budget is not None and size and not budget.reserve(size, size):
                    self._starved = True
                    break
                self._frames.append(memoryview(bytearray(self._view[start + 4:start + 4 + size])))
                start += 4 + size
            else:
                if 4 + size > len(staging):
                    if budget is None:
                        start = self._start_own_buffer(start, end, size)
                    else:
                        self._big = size  # staged until staging fills: see get_buffer
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _lend(self) -> memoryview:
        """A view of the rest of the own buffer; budgeted, remembered so that growing can release it."""
        view = memoryview(self._body)[self._filled:]
        if self._budget is not None:
            self._lent = view
        return view

    def _start_own_buffer(self, start: int, end: int, size: int) -> int:
        """Give a frame too big for staging its own buffer of its whole size; return the new staging start."""
        self._body = bytearray(size)
        self._size = size
        self._filled = end - start - 4
        self._body[:self._filled] = self._view[start + 4:end]
        return end

    def _promote(self) -> bool:
        """Move the staged start of a too-big frame to a buffer twice the staging size (budgeted)."""
        size, start, end = self._big, self._start, self._end
        capacity = min(size, 2 * len(self._staging))
        got = self._budget.reserve(capacity, size)
        if not got:
            self._starved = True
            return False
        staged = end - start - 4
        body = bytearray(capacity)
        body[:staged] = self._view[start + 4:end]
        self._body, self._size, self._filled, self._reserved = body, size, staged, got
        self._start = self._end = self._big = 0
        return True

    def _grow(self) -> bool:
        """Double a full own buffer, up to the frame's size, within what the budget grants."""
        capacity = min(self._size, 2 * len(self._body))
        if capacity > self._reserved:
            got = self._budget.reserve(capacity - self._reserved, self._size - self._reserved)
            if not got:
                self._starved = True
                return False
            self._reserved += got
        if self._lent is not None:
            self._lent.release()  # the view get_buffer lent into the full buffer: stale, and it pins the buffer
            self._lent = None
        try:
            # In place: realloc moves a large buffer by remapping its pages (mremap), not by copying them,
            # and bytes(n) comes from calloc, so the new part is written once. A copy costs twice the time.
            self._body += bytes(capacity - len(self._body))
        except BufferError:  # a view of the buffer is still held somewhere: copy instead
            body = bytearray(capacity)
            body[:self._filled] = self._body
            self._body = body
        return True

    def _compact(self) -> None:
        """Move the partial frame to the start of staging (copies less than one frame)."""
        n = self._end - self._start
        self._staging[:n] = bytes(self._view[self._start:self._end])  # no overlapping memcpy
        self._start, self._end = 0, n
