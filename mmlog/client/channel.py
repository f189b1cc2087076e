"""A non-blocking, pipelined connection to one broker, driven by whoever owns its selector.

The producer's sender thread and the consumer's fetcher keep several requests in
flight on one connection: `Channel.send` encodes a request and queues its bytes
with a callback (`queue_frame` queues a frame already encoded as buffers, such as
a Produce request whose record batches are not copied); `on_writable` and
`on_readable` move bytes when the owner's selector says so; each response is
decoded and handed to the callback of the oldest request in flight (Kafka answers
in order on a connection). Nothing here blocks except `connect`, which is bounded
by its timeout.

Writes are gathered: everything queued goes out in one `sendmsg` (up to `MAX_IOV`
buffers), so a producer step that queued ten requests costs one syscall, not ten
(a loopback send costs 10-30 µs of CPU on a 2-core machine, more than encoding a request).

Over TLS (`security`: the connection is wrapped and authenticated in `connect`)
an SSL socket has no sendmsg: queued buffers are joined into one SSL write of at
most `TLS_WRITE` bytes, kept until it is written whole (OpenSSL wants a write that
would block retried with the same bytes), and reads go on until OpenSSL has no
decrypted bytes left, which epoll cannot see.

A callback receives `(body, None)` or `(None, exception)`. When the connection
fails, every request in flight fails with `ConnectionClosed`, so callers can retry.
"""

from __future__ import annotations

import collections
import itertools
import selectors
import ssl
import struct
import time
from typing import Any, Callable

from mmlog.client.connection import ConnectionClosed, connect
from mmlog.security.client import ClientSecurity
from mmlog.protocol import FrameReader, ProtocolError, RequestHeader, decode_response, encode_request

Callback = Callable[[Any, BaseException | None], None]

CORRELATION_AT = 8  # bytes 8-11 of a request frame: size(4) api_key(2) api_version(2) correlation_id(4)
MAX_IOV = 512  # buffers per sendmsg (IOV_MAX is 1024 on Linux)
TLS_WRITE = 256 << 10  # bytes per SSL write
_I32 = struct.Struct(">i")


class Channel:
    """One broker connection with requests in flight."""

    def __init__(self, node_id: int, host: str, port: int, *, client_id: str = "mmlog",
                 connect_timeout: float = 10.0, security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.host, self.port = host, port
        self.client_id = client_id
        self.sock = connect(host, port, connect_timeout, security, client_id)
        self.sock.setblocking(False)
        self.tls = isinstance(self.sock, ssl.SSLSocket)
        self._tls_out: bytes | None = None  # the SSL write in progress
        self._ids = itertools.count(1)
        self._reader = FrameReader(max_frame_size=1 << 30)
        self._out = collections.deque()  # buffers still to write, and _Done markers
        # (correlation id, api key, version (None: hand the callback the raw frame), callback, sent at)
        self._inflight: collections.deque = collections.deque()
        self.closed = False
        self.last_error: BaseException | None = None

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def wants_write(self) -> bool:
        return bool(self._out)

    def events(self) -> int:
        return selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)

    def send(self, api_key: int, version: int, body: Any, callback: Callback | None,
             expect_response: bool = True) -> None:
        """Queue a request and write; the callback runs from on_readable (or at once, if the channel is closed)."""
        frame = encode_request(RequestHeader(api_key, version, 0, self.client_id), body)
        self.queue_frame([frame], api_key, version, callback, expect_response)
        self.on_writable()

    def queue_frame(self, parts: list, api_key: int, version: int, callback: Callback | None,
                    expect_response: bool = True, raw: bool = False) -> None:
        """Queue a request frame given as buffers (the first a bytearray holding the header, whose
        correlation id this fills in); `on_writable` writes it. With expect_response False the
        callback gets (None, None) once the frame is written (Produce with acks=0). With raw, the
        callback gets the response frame itself (without its size prefix), correlation id checked,
        for a caller that decodes it faster than the codec (a `FrameTemplate`)."""
        if self.closed:
            if callback is not None:
                callback(None, ConnectionClosed(f"connection to {self.host}:{self.port} is closed"))
            return
        correlation_id = next(self._ids)
        _I32.pack_into(parts[0], CORRELATION_AT, correlation_id)
        out = self._out
        for part in parts:
            if len(part):
                out.append(part)
        if expect_response:
            self._inflight.append((correlation_id, api_key, None if raw else version, callback, time.monotonic()))
        elif callback is not None:
            out.append(_Done(callback))

    def on_writable(self) -> None:
        """Write what the socket takes, many buffers per sendmsg; fail the channel if the peer is gone."""
        out = self._out
        try:
            while out:
                head = out[0]
                if head.__class__ is _Done:
                    out.popleft()
                    head.callback(None, None)
                    continue
                if len(out) == 1:
                    buffers = (head,)
                else:
                    buffers = []
                    for item in out:
                        if item.__class__ is _Done or len(buffers) == MAX_IOV:
                            break
                        buffers.append(item)
                n = self._send_tls(buffers) if self.tls else self.sock.sendmsg(buffers)
                for item in buffers:
                    size = len(item)
                    if n < size:
                        out[0] = memoryview(item)[n:]
                        return  # the socket buffer is full (TLS: the next write event goes on)
                    out.popleft()
                    n -= size
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return
        except OSError as exc:
            self.fail(ConnectionClosed(f"send to {self.host}:{self.port} failed: {exc}"))

    def _send_tls(self, buffers) -> int:
        """One SSL write of the buffers' first TLS_WRITE bytes, joined (an SSL socket has no sendmsg). A write
        that would block raises, and is retried with the same bytes, which OpenSSL requires."""
        if self._tls_out is None:
            chunks, size = [], 0
            for item in buffers:
                if chunks and size + len(item) > TLS_WRITE:
                    break
                chunks.append(item)
                size += len(item)
            self._tls_out = b"".join(chunks)
        n = self.sock.send(self._tls_out)  # all of it, or SSLWantWriteError
        self._tls_out = None
        return n

    def on_readable(self) -> None:
        """Read responses and run their callbacks."""
        reader = self._reader
        try:
            while True:
                buf = reader.get_buffer()
                n = self.sock.recv_into(buf)
                if n == 0:
                    raise ConnectionResetError("closed by the broker")
                reader.buffer_updated(n)
                if n < len(buf) and not self.tls:
                    break
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (OSError, ProtocolError) as exc:
            self._deliver()
            self.fail(ConnectionClosed(f"{self.host}:{self.port}: {exc}"))
            return
        self._deliver()

    def _deliver(self) -> None:
        next_frame = self._reader.next_frame
        inflight = self._inflight
        while True:
            frame = next_frame()
            if frame is None:
                return
            if not inflight:
                self.fail(ConnectionClosed(f"{self.host}:{self.port} sent a response nobody asked for"))
                return
            correlation_id, api_key, version, callback, _ = inflight.popleft()
            try:
                if version is None:  # raw: the callback decodes
                    if len(frame) < 4:
                        raise ProtocolError(f"a response of {len(frame)} bytes")
                    got, body = _I32.unpack_from(frame)[0], frame
                else:
                    got, body = decode_response(api_key, version, frame)
                if got != correlation_id:
                    raise ProtocolError(f"correlation id {got}, expected {correlation_id}")
            except ProtocolError as exc:
                self.fail(ConnectionClosed(f"{self.host}:{self.port}: bad response: {exc}"))
                if callback is not None:
                    callback(None, exc)
                return
            if callback is not None:
                callback(body, None)
                if self.closed:
                    return  # the callback found the response bad and failed the channel

    def oldest_request_age(self) -> float:
        return time.monotonic() - self._inflight[0][4] if self._inflight else 0.0

    def fail(self, exc: BaseException) -> None:
        """Close the channel; every request in flight gets exc."""
        if self.closed:
            return
        self.closed = True
        self.last_error = exc
        try:
            self.sock.close()
        except OSError:
            pass
        inflight, self._inflight = self._inflight, collections.deque()
        unsent = [part.callback for part in self._out if isinstance(part, _Done)]  # acks=0 never written
        self._out.clear()
        for _, _, _, callback, _ in inflight:
            if callback is not None:
                callback(None, exc)
        for callback in unsent:
            callback(None, exc)

    def close(self) -> None:
        self.fail(ConnectionClosed("closed by the client"))


class _Done:
    """A marker in the output queue: run callback once the bytes before it are written (acks=0)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callback) -> None:
        self.callback = callback

    def __len__(self) -> int:
        return 0
