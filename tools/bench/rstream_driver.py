"""RabbitMQ Streams through rstream (the stream protocol's Python client), for `tools/bench_peers.py`.

A stream is an append-only log in segment files on the node, read from any
offset: RabbitMQ's answer to a Kafka partition. A publish is confirmed once the
stream's writer has written it to the leader's segment file and, with replicas,
a quorum of them has (no fsync: the stream relies on replication, as Kafka
does); on one node that is the leader's write, the nearest to mmlog's acks=1
(and to acks=all with one replica).

Producer: batch 1 is `send_wait()` (one message, its confirm awaited);
batch 50 is `send_batch()` of 50 messages (one publish frame), up to WINDOW
batches unconfirmed. Consumer: `subscribe()` from the first offset, the callback
touching every message. Every client runs in a process of its own; `ready` is
set once connected and warmed up, and the measured part starts at `go`.
"""

from __future__ import annotations

import asyncio
import struct
import time
from contextlib import asynccontextmanager

import numpy as np

from tools.bench.common import MESSAGE_SIZE, Meter, awaited_async, payload, timed

WINDOW = 5  # batches unconfirmed at most, as mmlog's producer's 5 requests in flight
USER = dict(username="guest", password="guest")  # the default user, which the broker lets in on loopback only
CREDIT = 10  # chunks the server may send a subscription before it asks for more


def produce(address, stream: str, messages: int, batch: int, ready, go) -> dict:
    """Client process: `messages` messages to `stream`, each confirmed (batch 1) or `batch` a frame."""
    if batch == 1:
        return timed(awaited(address, stream), messages, ready, go)
    return asyncio.run(_produce(address, stream, messages, batch, ready, go))


def awaited(address, stream: str):
    """rstream, connected and the stream made: `send(n)` is n `send_wait()` calls, each confirm awaited."""

    @asynccontextmanager
    async def opened():
        from rstream import Producer

        async with Producer(*address, **USER) as producer:
            await producer.create_stream(stream, exists_ok=True)
            value, send_wait = payload(), producer.send_wait

            async def send(n: int) -> None:
                for _ in range(n):
                    await send_wait(stream, value)

            yield send

    return awaited_async(opened)


async def _produce(address, stream, messages, batch, ready, go) -> dict:
    from rstream import Producer

    value = payload()
    async with Producer(*address, **USER) as producer:
        await producer.create_stream(stream, exists_ok=True)
        await producer.send_wait(stream, value)  # the publisher and its connection exist before the clock
        ready.set()
        go.wait()
        meter, sent = Meter(), 0
        confirmed, enough = 0, asyncio.Event()
        want = 0

        def on_confirm(status) -> None:
            nonlocal confirmed
            if not status.is_confirmed:
                raise RuntimeError(f"rabbitmq stream refused message {status.message_id}: {status.response_code}")
            confirmed += 1
            if confirmed >= want:
                enough.set()

        frame = [value] * batch
        while sent < messages:
            m = min(batch, messages - sent)
            await producer.send_batch(stream, frame[:m], on_publish_confirm=on_confirm)
            sent += m
            if sent - confirmed > WINDOW * batch:  # wait for room
                want = sent - WINDOW * batch
                enough.clear()
                if confirmed < want:
                    await asyncio.wait_for(enough.wait(), 30)
            meter.tick(confirmed)
        want = messages
        enough.clear()
        if confirmed < want:
            await asyncio.wait_for(enough.wait(), 60)
        return meter.result(messages)


def consume(address, stream: str, messages: int, ready, go) -> dict:
    """Client process: read `messages` messages of `stream` from its first offset, each value touched."""
    return asyncio.run(_consume(address, stream, messages, ready, go))


async def _consume(address, stream, messages, ready, go) -> dict:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

    n = nbytes = 0
    done = asyncio.Event()
    async with Consumer(*address, **USER) as consumer:
        ready.set()
        go.wait()
        meter = Meter()

        def on_message(message, context) -> None:
            nonlocal n, nbytes
            n += 1
            nbytes += len(message)
            if not n & 1023:
                meter.tick(n)
            if n >= messages:
                done.set()

        await consumer.subscribe(stream, on_message, initial_credit=CREDIT,
                                 offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        await asyncio.wait_for(done.wait(), 120 + messages / 500)
        return meter.result(messages, nbytes)


def latency_producer(address, stream: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` stamped messages at `rate` a second; the due ones in one `send_batch()`,
    confirms not awaited (they come back in the background)."""
    return asyncio.run(_latency_producer(address, stream, rate, count, created, go))


async def _latency_producer(address, stream, rate, count, created, go) -> dict:
    from rstream import Producer

    from tools.bench.latency import paced_async

    pad = payload(MESSAGE_SIZE - 8)
    async with Producer(*address, **USER) as producer:
        await producer.create_stream(stream, exists_ok=True)
        await producer.send_wait(stream, bytes(8) + pad)
        created.set()
        await asyncio.to_thread(go.wait)
        stamp, now = struct.Struct("<q").pack, time.monotonic_ns

        async def burst(n: int) -> None:
            await producer.send_batch(stream, [stamp(now()) + pad for _ in range(n)])

        achieved = await paced_async(burst, rate, count)
        await producer.send_wait(stream, bytes(8) + pad)  # every earlier message confirmed before it
    return {"achieved": achieved}


def latency_consumer(address, stream: str, count: int, ready) -> np.ndarray:
    """Client process: subscribe from the first offset; send -> receipt in ms for `count` stamped messages."""
    return asyncio.run(_latency_consumer(address, stream, count, ready))


async def _latency_consumer(address, stream, count, ready) -> np.ndarray:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

    stamps, arrived = [], []
    done = asyncio.Event()

    def on_message(message, context) -> None:
        stamps.append(message[:8])
        arrived.append(time.monotonic_ns())
        ready.set()
        if len(arrived) > count:  # the paced ones and the stamp-0 one
            done.set()

    async with Consumer(*address, **USER) as consumer:
        await consumer.subscribe(stream, on_message, initial_credit=CREDIT,
                                 offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        await asyncio.wait_for(done.wait(), 120 + count / 500)
    from tools.bench.latency import received_ms

    return received_ms(stamps, arrived, count)
