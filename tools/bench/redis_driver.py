"""Redis Streams under the paper's tests: redis-py (with hiredis when installed), and a raw RESP sender.

Producer: XADD <stream> * v <200 bytes>, through redis-py as a user would write
it: one `xadd()` call per message for batch 1, a non-transactional pipeline of
50 XADDs per `execute()` for batch 50 (redis-py waits for a pipeline's replies
before the next one: that is its pipeline). Beside it, the server's upper bound:
a raw-protocol sender writing pre-encoded XADDs, `batch` a `send()`, up to
1,000 commands unanswered, and counting the replies in bulk (`resp`). The
server appends to its AOF and fsyncs it every second (appendfsync everysec).
Consumer: XREAD COUNT 1000 from the stream of the batch-50 redis-py run, every
value touched as the mmlog iterator's are.
"""

from __future__ import annotations

import socket
import struct
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tools.bench.common import MESSAGE_SIZE, ClientProcess, Meter, Result, Rows, payload, timed
from tools.bench.resp import BulkReplyCounter, encode_command

SYSTEM = "redis"
WINDOW = 1000  # raw sender: XADDs sent and not yet answered, at most (about 230 KB)
CHUNK = 1000  # messages between two looks at the clock
XREAD_COUNT = 1000  # entries per XREAD: about 200 KB of values, the consumer test's pull


def _client(address):
    import redis

    return redis.Redis(*address)


def produce_py(address, key: str, messages: int, batch: int, ready=None, go=None) -> dict:
    """Client process: `messages` XADDs through redis-py, one call each (batch 1) or `batch` per pipeline
    (warmed up, it sets `ready` and waits for `go`, when given)."""
    if batch == 1:
        return timed(awaited(address, key), messages, ready, go)
    r, value = _client(address), payload()
    fields = {"v": value}
    r.xadd(key, fields)  # connect, and create the stream, before the clock starts
    if ready is not None:
        ready.set()
        go.wait()
    meter, sent = Meter(), 0
    pipe = r.pipeline(transaction=False)
    while sent < messages:
        m = min(batch, messages - sent)
        for _ in range(m):  # redis-py queues one command per call; execute() sends them in one write
            pipe.xadd(key, fields)
        pipe.execute()
        sent += m
        meter.tick(sent)
    return meter.result(messages)


@contextmanager
def awaited(address, key: str):
    """redis-py, connected and the stream created: `send(n)` makes n `xadd()` calls, each answered before
    the next."""
    r = _client(address)
    fields = {"v": payload()}

    def send(n: int) -> None:
        xadd = r.xadd
        for _ in range(n):
            xadd(key, fields)

    send(1)
    try:
        yield send
    finally:
        r.close()


def produce_raw(address, key: str, messages: int, batch: int, window: int = WINDOW) -> dict:
    """Client process: `messages` pre-encoded XADDs, `batch` per send(), at most `window` unanswered."""
    command = encode_command("XADD", key, "*", "v", payload())
    frame = command * batch
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    replies, buf = BulkReplyCounter(), bytearray(1 << 20)

    def take(flags: int = 0) -> None:
        got = sock.recv_into(buf, len(buf), flags)
        if not got:
            raise ConnectionError("redis closed the connection")
        replies.feed(memoryview(buf)[:got])

    sock.sendall(command)  # the stream exists before the clock starts
    while not replies.count:
        take()
    meter, sent = Meter(), 0
    while sent < messages:
        m = min(batch, messages - sent)
        sock.sendall(frame if m == batch else command * m)
        sent += m
        while sent - (replies.count - 1) > window:  # wait for room (the warm-up reply is not counted)
            take()
        try:  # and take whatever else has come, without waiting
            while True:
                take(socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        meter.tick(replies.count - 1)
    while replies.count - 1 < messages:
        take()
    sock.close()
    return meter.result(messages)


def consume(address, key: str, messages: int, count: int = XREAD_COUNT, ready=None, go=None) -> dict:
    """Client process: XREAD COUNT `count` from the start of `key` until `messages` entries have come."""
    r = _client(address)
    if ready is not None:
        r.ping()
        ready.set()
        go.wait()
    last, n, nbytes = "0-0", 0, 0
    meter = Meter()
    while n < messages:
        reply = r.xread({key: last}, count=count)
        if not reply:
            raise RuntimeError(f"stream {key} ended after {n:,} of {messages:,} entries")
        entries = reply[0][1]
        n += len(entries)
        nbytes += sum(len(fields[b"v"]) for _, fields in entries)  # each value touched, as mmlog's iterator
        last = entries[-1][0]
        meter.tick(n)
    return meter.result(n, nbytes)


def latency_producer(address, key: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` XADDs at `rate` a second, each stamped; the due ones in one pipeline."""
    from tools.bench.latency import paced

    r, pad = _client(address), payload(MESSAGE_SIZE - 8)
    r.xadd(key, {"v": bytes(8) + pad})
    created.set()
    go.wait()
    pipe, stamp, now = r.pipeline(transaction=False), struct.Struct("<q").pack, time.monotonic_ns

    def burst(n: int) -> None:
        for _ in range(n):
            pipe.xadd(key, {"v": stamp(now()) + pad})
        pipe.execute()

    return {"achieved": paced(burst, rate, count)}


def latency_consumer(address, key: str, count: int, ready) -> np.ndarray:
    """Client process: XREAD BLOCK from the start of `key`; send -> receipt in ms for `count` stamped entries."""
    from tools.bench.latency import elapsed_ms

    r = _client(address)
    last, got, out = "0-0", 0, []
    while got < count:
        reply = r.xread({key: last}, count=XREAD_COUNT, block=1000)
        if not reply:
            continue
        now = time.monotonic_ns()
        entries = reply[0][1]
        last = entries[-1][0]
        out.append(elapsed_ms(now, np.frombuffer(b"".join([fields[b"v"][:8] for _, fields in entries]), "<i8")))
        got += len(out[-1])
        ready.set()
    return np.concatenate(out)[:count]


def bench(cfg, workdir: Path, log) -> tuple[list[Result], list]:
    """Every Redis test of the run, against one redis-server."""
    from tools.bench import latency
    from tools.bench.servers import RedisServer

    results = Rows(SYSTEM, log)
    with RedisServer(workdir) as server:
        addr = server.address
        r = _client(addr)
        runs = [("redis-py XADD, batch 1", produce_py, 1, cfg.batch1_messages),
                ("redis-py pipeline, batch 50", produce_py, 50, cfg.messages),
                (f"raw RESP pipeline (window {WINDOW}), batch 1", produce_raw, 1, cfg.batch1_messages),
                (f"raw RESP pipeline (window {WINDOW}), batch 50", produce_raw, 50, cfg.messages)]
        for variant, fn, batch, n in runs:
            key = f"{fn.__name__}-{batch}"
            res = ClientProcess(fn, addr, key, n, batch).result(cfg.timeout(n))
            results.add("produce", variant, batch, res)
            if key != "produce_py-50":
                r.unlink(key)  # memory: only the consumer test's stream is kept
        res = ClientProcess(consume, addr, "produce_py-50", cfg.messages).result(cfg.timeout(cfg.messages))
        results.add("consume", f"redis-py XREAD COUNT {XREAD_COUNT}", None, res)
        r.unlink("produce_py-50")
        lat = latency.measure(SYSTEM, "redis-py pipeline per tick; XREAD BLOCK", latency_producer, latency_consumer,
                              (addr, "latency"), cfg, log)
        r.close()
    return results, [lat]
