"""Many producer connections from few client processes: pre-encoded Produce requests over non-blocking sockets.

`produce(...)` runs in a client process (common.ClientProcess). It opens `conns`
connections, each keeping up to `window` Produce requests in flight (acks=1,
`batch` records of 200 bytes in one partition a request), and serves them all
from one selector loop: no client thread per connection, no Python per record.
The request is encoded once with mmlog's codec; each send patches the partition
index (a request goes to the next partition of the process's stride, so
requests spread over every partition of the topic) and joins the requests that
fit the window into one `send`. Responses are framed by their size prefix and
their error code read at its fixed place (Produce v8: correlation id, topic
count, name, partition count, index, error code). The round trip of every
request (send to response) is kept: the latency samples.

Two ways to stop: after `seconds` (the curves' steady load) or after `requests`
(filling a log to a size). Either way the requests in flight are drained.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from collections import deque

import numpy as np

from tools.bench.common import MESSAGE_SIZE, payload

SENTINEL = 0x5A5A5A5A  # the partition index the template is encoded with, found and patched per send
PACK_INDEX = struct.Struct(">i").pack


def template(topic: str, batch: int) -> tuple[bytes, bytes]:
    """(head, tail) of a Produce v8 request of `batch` records: head + 4-byte partition index + tail."""
    from mmlog.protocol import RequestHeader, encode_request
    from mmlog.protocol.messages import produce
    from mmlog.protocol.records import build_batch

    records = build_batch([(None, payload())] * batch)
    body = produce.REQUEST(acks=1, timeout_ms=30_000, topic_data=[
        {"name": topic, "partition_data": [{"index": SENTINEL, "records": records}]}])
    frame = bytes(encode_request(RequestHeader(produce.API_KEY, 8, 1, "bench-mux"), body))
    at = frame.rindex(PACK_INDEX(SENTINEL))
    return frame[:at], frame[at + 4:]


class _Conn:
    __slots__ = ("sock", "sent_at", "out", "buf")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent_at: deque[float] = deque()  # send times of the requests in flight, oldest first
        self.out = memoryview(b"")  # bytes not yet taken by the socket
        self.buf = bytearray()  # response bytes not yet framed


def produce(bootstrap: str, topic: str, partitions: int, conns: int, window: int, batch: int,
            seconds: float | None = None, requests: int | None = None, stride: tuple[int, int] = (0, 1),
            ready=None, go=None) -> dict:
    """Client process: Produce over `conns` connections until `seconds` pass or `requests` are answered.
    `stride` (k, n): this process's requests go to partitions k, k+n, k+2n, ... (mod `partitions`).
    Returns records acknowledged, seconds, and the round trips in ms (float32)."""
    host, port = bootstrap.rsplit(":", 1)
    head, tail = template(topic, batch)
    error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
    sel = selectors.DefaultSelector()
    clients = []
    for _ in range(conns):
        sock = socket.create_connection((host, int(port)), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        c = _Conn(sock)
        sel.register(sock, selectors.EVENT_READ, c)
        clients.append(c)
    if ready is not None:
        ready.set()
        go.wait()
    k, n = stride
    cursor = k % partitions
    step = n % partitions or partitions
    answered = issued = 0
    errors: dict[int, int] = {}
    lat: list[float] = []
    start = time.monotonic()
    stop_at = start + seconds if seconds is not None else float("inf")
    budget = requests if requests is not None else 1 << 62
    now = start
    while True:
        sending = now < stop_at and issued < budget
        for c in clients:
            if c.out:
                _push(sel, c)
                continue
            room = min(window - len(c.sent_at), budget - issued) if sending else 0
            if room > 0:
                parts = []
                for _ in range(room):
                    parts.append(head + PACK_INDEX(cursor) + tail)
                    cursor = (cursor + step) % partitions
                    c.sent_at.append(now)
                issued += room
                c.out = memoryview(b"".join(parts))
                _push(sel, c)
        if answered == issued and not sending:
            break
        for key, events in sel.select(1.0):
            c = key.data
            if events & selectors.EVENT_WRITE:
                _push(sel, c)
            if events & selectors.EVENT_READ:
                got = _read(c, error_at, lat, errors)
                if got < 0:
                    raise ConnectionError("the broker closed a connection")
                answered += got
        now = time.monotonic()
        if not sending and now > stop_at + 60:
            raise TimeoutError(f"{issued - answered} requests unanswered 60 s after the end")
    elapsed = time.monotonic() - start
    for c in clients:
        c.sock.close()
    if errors:
        raise RuntimeError(f"Produce errors (code: count): {errors}")
    return dict(messages=answered * batch, nbytes=answered * batch * MESSAGE_SIZE, seconds=elapsed,
                requests=answered, latency_ms=np.asarray(lat, np.float32))


def _push(sel, c: _Conn) -> None:
    """Send what the socket takes; watch for writability while something is left."""
    try:
        n = c.sock.send(c.out)
    except BlockingIOError:
        n = 0
    c.out = c.out[n:]
    sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0), c)


def _read(c: _Conn, error_at: int, lat: list, errors: dict) -> int:
    """Take the responses that arrived; their round trips go to `lat`. -1 if the broker closed."""
    try:
        chunk = c.sock.recv(1 << 18)
    except BlockingIOError:
        return 0
    if not chunk:
        return -1
    c.buf += chunk
    buf, pos, done, now = c.buf, 0, 0, time.monotonic()
    while len(buf) - pos >= 4:
        size = int.from_bytes(buf[pos:pos + 4], "big")
        if len(buf) - pos - 4 < size:
            break
        code = int.from_bytes(buf[pos + 4 + error_at:pos + 6 + error_at], "big", signed=True)
        if code:
            errors[code] = errors.get(code, 0) + 1
        lat.append((now - c.sent_at.popleft()) * 1000)
        pos += 4 + size
        done += 1
    del buf[:pos]
    return done
