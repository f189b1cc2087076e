"""NATS JetStream through nats-py, for `tools/bench_peers.py`.

One stream per test (subject = stream name), file storage, one replica: the
server acknowledges a publish once the stream's file store has taken it
(written to the store's block file; the store fsyncs on its own schedule,
`sync_interval`, two minutes by default), the nearest to mmlog's acks=1 (and to
acks=all with one replica; with replicas, JetStream acks after a quorum).

Producer: batch 1 is `js.publish()` (one message, its ack awaited); batch 50 is
50 `publish_async()` calls, up to WINDOW batches unacknowledged. Consumer: an
ordered push consumer from the first message (no acks, flow control: JetStream's
way to read a stream in order, like a Kafka consumer keeping its own position),
every value touched; nats-py's pull consumer (`fetch(1000)`) was about 5x slower
here (it awaits every message with a timeout). End-to-end latency: the due
messages by `publish_async` each tick, their acks awaited, and the same ordered
push consumer.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from contextlib import asynccontextmanager

import numpy as np

from tools.bench.common import MESSAGE_SIZE, Meter, awaited_async, payload, timed

WINDOW = 5  # batches unacknowledged at most, as mmlog's producer's 5 requests in flight


async def _connect(address):
    import nats

    nc = await nats.connect(f"nats://{address[0]}:{address[1]}", max_reconnect_attempts=0)
    return nc, nc.jetstream()


async def _stream(js, name: str) -> None:
    from nats.js.api import StorageType

    await js.add_stream(name=name, subjects=[name], storage=StorageType.FILE, num_replicas=1)


def produce(address, stream: str, messages: int, batch: int, ready, go) -> dict:
    """Client process: `messages` messages to `stream`, each ack awaited (batch 1) or `batch` a window slot."""
    if batch == 1:
        return timed(awaited(address, stream), messages, ready, go)
    return asyncio.run(_produce(address, stream, messages, batch, ready, go))


def awaited(address, stream: str):
    """nats-py, connected and the stream made: `send(n)` is n `js.publish()` calls, each ack awaited."""

    @asynccontextmanager
    async def opened():
        nc, js = await _connect(address)
        try:
            await _stream(js, stream)
            value, publish = payload(), js.publish

            async def send(n: int) -> None:
                for _ in range(n):
                    await publish(stream, value)

            yield send
        finally:
            await nc.close()

    return awaited_async(opened)


async def _produce(address, stream, messages, batch, ready, go) -> dict:
    nc, js = await _connect(address)
    value = payload()
    try:
        await _stream(js, stream)
        await js.publish(stream, value)
        ready.set()
        go.wait()
        meter, sent = Meter(), 0
        publish_async, pending, acked = js.publish_async, deque(), 0
        while sent < messages:
            m = min(batch, messages - sent)
            pending.append([await publish_async(stream, value) for _ in range(m)])
            sent += m
            if len(pending) > WINDOW:
                acked += await _acked(pending.popleft())
                meter.tick(acked)
        while pending:
            acked += await _acked(pending.popleft())
        return meter.result(messages)
    finally:
        await nc.close()


async def _acked(futures: list) -> int:
    """Await a batch's acks (a refused publish raises); the count."""
    await asyncio.gather(*futures)
    return len(futures)


def consume(address, stream: str, messages: int, ready, go) -> dict:
    """Client process: read `messages` messages of `stream` from the first, each value touched."""
    return asyncio.run(_consume(address, stream, messages, ready, go))


async def _consume(address, stream, messages, ready, go) -> dict:
    nc, js = await _connect(address)
    n = nbytes = 0
    done = asyncio.Event()
    try:
        ready.set()
        go.wait()
        meter = Meter()

        async def on_message(msg) -> None:
            nonlocal n, nbytes
            n += 1
            nbytes += len(msg.data)
            if not n & 1023:
                meter.tick(n)
            if n >= messages:
                done.set()

        await js.subscribe(stream, cb=on_message, ordered_consumer=True)
        await asyncio.wait_for(done.wait(), 120 + messages / 500)
        return meter.result(messages, nbytes)
    finally:
        await nc.close()


def latency_producer(address, stream: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` stamped messages at `rate` a second; the due ones by publish_async, acks awaited."""
    return asyncio.run(_latency_producer(address, stream, rate, count, created, go))


async def _latency_producer(address, stream, rate, count, created, go) -> dict:
    from tools.bench.latency import paced_async

    nc, js = await _connect(address)
    pad = payload(MESSAGE_SIZE - 8)
    try:
        await _stream(js, stream)
        await js.publish(stream, bytes(8) + pad)
        created.set()
        await asyncio.to_thread(go.wait)
        stamp, now = struct.Struct("<q").pack, time.monotonic_ns

        async def burst(n: int) -> None:
            await _acked([await js.publish_async(stream, stamp(now()) + pad) for _ in range(n)])

        return {"achieved": await paced_async(burst, rate, count)}
    finally:
        await nc.close()


def latency_consumer(address, stream: str, count: int, ready) -> np.ndarray:
    """Client process: an ordered push consumer from the first message; send -> receipt in ms."""
    return asyncio.run(_latency_consumer(address, stream, count, ready))


async def _latency_consumer(address, stream, count, ready) -> np.ndarray:
    nc, js = await _connect(address)
    stamps, arrived = [], []
    done = asyncio.Event()

    async def on_message(msg) -> None:
        arrived.append(time.monotonic_ns())
        stamps.append(msg.data[:8])
        ready.set()
        if len(arrived) > count:  # the paced ones and the stamp-0 one
            done.set()

    try:
        await js.subscribe(stream, cb=on_message, ordered_consumer=True)
        await asyncio.wait_for(done.wait(), 120 + count / 500)
    finally:
        await nc.close()
    from tools.bench.latency import received_ms

    return received_ms(stamps, arrived, count)
