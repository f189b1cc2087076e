"""mmlog through confluent-kafka (librdkafka), the client most Kafka users produce with, for `tools/bench_peers.py`.

Producer (acks=1 unless told): batch 1 is `produce()` then `flush()` for every
message (one record a request, each awaited, linger 0); batch 50 is `produce()`
with `batch.num.messages=50`, `linger.ms=5`, up to 5 requests in flight, the
delivery reports served by `poll(0)` as it goes and `flush()` at the end.
Consumer: an assigned partition from the beginning, `consume(1000)` a call,
every value touched, with `fetch.queue.backoff.ms=0` (librdkafka's default
1,000 ms holds back the next fetch once its queue is full, which stalls a fast
consumer) and 200 KB fetches (`max.partition.fetch.bytes`; one partition).
Latency: linger 0, `fetch.wait.max.ms=500` long polls, `poll()` a record
(`consume(1000, t)` waits for 1,000 records or for `t`: 50 ms of p50 at
2,000 msg/s). Every client sets `socket.nagle.disable=true` (TCP_NODELAY, as
mmlog's own client does; librdkafka's default leaves Nagle on).
"""

from __future__ import annotations

import struct
import time
from contextlib import contextmanager

import numpy as np

from tools.bench.common import MESSAGE_SIZE, Meter, payload, timed

CHUNK = 1000  # messages between two looks at the clock
CONSUME = 1000  # messages a consume() call
FETCH_BYTES = 200_000


def _producer(bootstrap: str, acks, **extra):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": str(acks), "enable.idempotence": False,
                     "max.in.flight.requests.per.connection": 5, "queue.buffering.max.messages": 1_000_000,
                     "socket.nagle.disable": True, "client.id": "mmlog-bench-librdkafka", **extra})


def _delivered(failures: list):
    def report(err, msg) -> None:
        if err is not None:
            failures.append(err)
    return report


def produce(bootstrap: str, topic: str, messages: int, batch: int, ready, go, acks: int = 1) -> dict:
    """Client process: `messages` records to `topic` through librdkafka, each flushed (batch 1) or in batches."""
    if batch == 1:
        return timed(awaited(bootstrap, topic, acks), messages, ready, go)
    value, failures = payload(), []
    producer = _producer(bootstrap, acks, **{"linger.ms": 5, "batch.num.messages": batch})
    on_delivery = _delivered(failures)
    producer.produce(topic, value, on_delivery=on_delivery)  # metadata, auto-creation and a connection
    producer.flush(30)
    ready.set()
    go.wait()
    return send_pipelined(producer, topic, value, messages, on_delivery, failures)


@contextmanager
def awaited(bootstrap: str, topic: str, acks: int = 1):
    """librdkafka at linger 0 (connected, the topic's metadata known): `send(n)` produces n records, each
    flushed (its request answered) before the next."""
    value, failures = payload(), []
    producer = _producer(bootstrap, acks, **{"linger.ms": 0})
    on_delivery = _delivered(failures)

    def send(n: int) -> None:
        produce_, flush = producer.produce, producer.flush
        for _ in range(n):
            produce_(topic, value, on_delivery=on_delivery)
            flush(30)
        if failures:
            raise RuntimeError(f"librdkafka: {len(failures)} records failed, the first: {failures[0]}")

    send(1)  # metadata, auto-creation and a connection
    yield send
    if producer.flush(60):
        raise RuntimeError("librdkafka: records left undelivered after 60 s")


def send_pipelined(producer, topic: str, value: bytes, messages: int, on_delivery, failures: list) -> dict:
    """`messages` records through `producer` without waiting: delivery reports served every CHUNK records
    (and whenever the local queue is full); the meter's result once every record is delivered."""
    meter, sent, produce_, poll = Meter(), 0, producer.produce, producer.poll
    while sent < messages:
        m = min(CHUNK, messages - sent)
        for _ in range(m):
            try:
                produce_(topic, value, on_delivery=on_delivery)
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                poll(0.01)
                produce_(topic, value, on_delivery=on_delivery)
        poll(0)
        sent += m
        meter.tick(sent)
    return _delivered_all(producer, failures, meter, messages)


def _delivered_all(producer, failures: list, meter: Meter, messages: int) -> dict:
    if producer.flush(60):
        raise RuntimeError("librdkafka: records left undelivered after 60 s")
    if failures:
        raise RuntimeError(f"librdkafka: {len(failures)} records failed, the first: {failures[0]}")
    return meter.result(messages)


def _consumer(bootstrap: str, **extra):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "mmlog-bench-librdkafka", "socket.nagle.disable": True,
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 0,
                     "max.partition.fetch.bytes": FETCH_BYTES, **extra})


def _assign_from_start(consumer, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])


def consume(bootstrap: str, topic: str, messages: int, ready, go) -> dict:
    """Client process: `messages` records of `topic` from the beginning, CONSUME a call, each value touched."""
    consumer = _consumer(bootstrap)
    try:
        _assign_from_start(consumer, topic)
        ready.set()
        go.wait()
        meter, n, nbytes = Meter(), 0, 0
        while n < messages:
            for msg in consumer.consume(CONSUME, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"librdkafka: {msg.error()}")
                n += 1
                nbytes += len(msg.value())
            meter.tick(n)
        return meter.result(n, nbytes)
    finally:
        consumer.close()


def latency_producer(bootstrap: str, topic: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` stamped records at `rate` a second, acks=1, linger 0."""
    from tools.bench.latency import paced

    pad, failures = payload(MESSAGE_SIZE - 8), []
    producer = _producer(bootstrap, 1, **{"linger.ms": 0})
    on_delivery = _delivered(failures)
    producer.produce(topic, bytes(8) + pad, on_delivery=on_delivery)
    producer.flush(30)
    created.set()
    go.wait()
    stamp, now = struct.Struct("<q").pack, time.monotonic_ns

    def burst(n: int) -> None:
        for _ in range(n):
            producer.produce(topic, stamp(now()) + pad, on_delivery=on_delivery)
        producer.poll(0)

    achieved = paced(burst, rate, count)
    producer.flush(30)
    if failures:
        raise RuntimeError(f"librdkafka: {len(failures)} records failed, the first: {failures[0]}")
    return {"achieved": achieved}


def latency_consumer(bootstrap: str, topic: str, count: int, ready) -> np.ndarray:
    """Client process: long-poll `topic` from the beginning; send -> receipt in ms for `count` stamped records."""
    consumer = _consumer(bootstrap, **{"fetch.wait.max.ms": 500})
    stamps, arrived = [], []
    try:
        _assign_from_start(consumer, topic)
        poll = consumer.poll  # one record as soon as it is there (consume(n, t) waits for n records or t)
        while len(arrived) <= count:  # the paced ones and the stamp-0 one
            msg = poll(0.1)
            if msg is not None and msg.error() is None:
                arrived.append(time.monotonic_ns())
                stamps.append(msg.value()[:8])
                ready.set()
    finally:
        consumer.close()
    from tools.bench.latency import received_ms

    return received_ms(stamps, arrived, count)
