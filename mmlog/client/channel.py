"""A non-blocking, pipelined connection to one broker, driven by whoever owns its selector.

The producer's sender thread and the consumer's fetcher keep several requests in
flight on one connection: `Channel.send` encodes a request and queues its bytes
with a callback; `on_writable` and `on_readable` move bytes when the owner's
selector says so; each response is decoded and handed to the callback of the
oldest request in flight (Kafka answers in order on a connection). Nothing here
blocks except `connect`, which is bounded by its timeout.

A callback receives `(body, None)` or `(None, exception)`. When the connection
fails, every request in flight fails with `ConnectionClosed`, so callers can retry.
"""

from __future__ import annotations

import collections
import itertools
import selectors
import time
from typing import Any, Callable

from mmlog.client.connection import ConnectionClosed, connect
from mmlog.protocol import FrameReader, ProtocolError, RequestHeader, decode_response, encode_request

Callback = Callable[[Any, BaseException | None], None]


class Channel:
    """One broker connection with requests in flight."""

    def __init__(self, node_id: int, host: str, port: int, *, client_id: str = "mmlog",
                 connect_timeout: float = 10.0) -> None:
        self.node_id = node_id
        self.host, self.port = host, port
        self.client_id = client_id
        self.sock = connect(host, port, connect_timeout)
        self.sock.setblocking(False)
        self._ids = itertools.count(1)
        self._reader = FrameReader(max_frame_size=1 << 30)
        self._out = collections.deque()  # memoryviews still to write
        self._inflight: collections.deque = collections.deque()  # (correlation id, key, version, callback, sent)
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
        """Queue a request; the callback runs from on_readable (or at once, if the channel is closed)."""
        if self.closed:
            if callback is not None:
                callback(None, ConnectionClosed(f"connection to {self.host}:{self.port} is closed"))
            return
        correlation_id = next(self._ids)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body)
        self._out.append(memoryview(frame))
        if expect_response:
            self._inflight.append((correlation_id, api_key, version, callback, time.monotonic()))
        elif callback is not None:
            self._out.append(_Done(callback))
        self.on_writable()

    def on_writable(self) -> None:
        """Write what the socket takes; fail the channel if the peer is gone."""
        try:
            while self._out:
                head = self._out[0]
                if isinstance(head, _Done):
                    self._out.popleft()
                    head.callback(None, None)
                    continue
                n = self.sock.send(head)
                if n < len(head):
                    self._out[0] = head[n:]
                    return
                self._out.popleft()
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(ConnectionClosed(f"send to {self.host}:{self.port} failed: {exc}"))

    def on_readable(self) -> None:
        """Read responses and run their callbacks."""
        try:
            while True:
                buf = self._reader.get_buffer()
                n = self.sock.recv_into(buf)
                if n == 0:
                    raise ConnectionResetError("closed by the broker")
                self._reader.buffer_updated(n)
                if n < len(buf):
                    break
        except BlockingIOError:
            pass
        except (OSError, ProtocolError) as exc:
            self._deliver()
            self.fail(ConnectionClosed(f"{self.host}:{self.port}: {exc}"))
            return
        self._deliver()

    def _deliver(self) -> None:
        while True:
            frame = self._reader.next_frame()
            if frame is None:
                return
            if not self._inflight:
                self.fail(ConnectionClosed(f"{self.host}:{self.port} sent a response nobody asked for"))
                return
            correlation_id, api_key, version, callback, _ = self._inflight.popleft()
            try:
                got, body = self._decode(api_key, version, frame)
                if got != correlation_id:
                    raise ProtocolError(f"correlation id {got}, expected {correlation_id}")
            except ProtocolError as exc:
                self.fail(ConnectionClosed(f"{self.host}:{self.port}: bad response: {exc}"))
                if callback is not None:
                    callback(None, exc)
                return
            if callback is not None:
                callback(body, None)

    def _decode(self, api_key: int, version: int, frame) -> tuple[int, Any]:
        """(correlation id, body) of a response frame; subclasses may add faster paths."""
        return decode_response(api_key, version, frame)

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
