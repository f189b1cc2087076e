"""RabbitMQ under the paper's tests, through pika (its Python client) on a BlockingConnection.

Producer: basic_publish to a durable queue (default exchange), persistent
messages (delivery_mode 2), no publisher confirms: the asynchronous case.
pika's BlockingChannel flushes the socket after every publish, so batch 1 is
one `basic_publish()` each; batch 50 queues 49 publishes on the channel
underneath (`channel._impl`, pika's asynchronous channel) and lets the 50th
`basic_publish()` flush all 50 at once. The run ends when the queue holds every
message (a passive queue.declare counts them), the producer's "flush".
Consumer: basic_consume on the queue of the batch-50 run with prefetch 1000 and
manual acks, one `multiple=True` ack every 500 messages (half the window, so
the server never waits for one); each body touched, as mmlog's iterator.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np

from tools.bench.common import MESSAGE_SIZE, ClientProcess, Meter, Result, Rows, payload

SYSTEM = "rabbitmq"
PREFETCH = 1000
ACK_EVERY = PREFETCH // 2
CHUNK = 1000  # messages between two looks at the clock


def _channel(address, queue: str):
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters(*address, blocked_connection_timeout=300))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    return conn, ch


def _publisher(ch, queue: str):
    """publish(body, flush): one persistent message to `queue`; written to the socket when flush is true."""
    import pika

    props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
    queue_it, publish = ch._impl.basic_publish, ch.basic_publish

    def send(body: bytes, flush: bool = True) -> None:
        (publish if flush else queue_it)(exchange="", routing_key=queue, body=body, properties=props)

    return send


def produce(address, queue: str, messages: int, batch: int) -> dict:
    """Client process: `messages` persistent publishes, written `batch` at a time, then wait until queued."""
    conn, ch = _channel(address, queue)
    value = payload()
    publish = _publisher(ch, queue)
    publish(value)  # the first message: counted by the consumer test like the rest
    meter, sent = Meter(), 0
    while sent < messages:
        m = min(CHUNK - CHUNK % batch, messages - sent)
        for i in range(1, m + 1):
            publish(value, not i % batch or i == m)
        sent += m
        meter.tick(sent)
    while ch.queue_declare(queue, durable=True, passive=True).method.message_count < messages + 1:
        conn.sleep(0.005)
    result = meter.result(messages)
    conn.close()
    return result


def consume(address, queue: str, messages: int, prefetch: int = PREFETCH) -> dict:
    """Client process: basic_consume `messages` messages from `queue`, prefetch `prefetch`, acks every ACK_EVERY."""
    conn, ch = _channel(address, queue)
    ch.basic_qos(prefetch_count=prefetch)
    state = [0, 0]  # messages, bytes
    meter = Meter()

    def on_message(channel, method, _props, body) -> None:
        state[0] += 1
        state[1] += len(body)
        n = state[0]
        if not n % ACK_EVERY or n >= messages:
            channel.basic_ack(method.delivery_tag, multiple=True)
        if not n % CHUNK:
            meter.tick(n)
        if n >= messages:
            channel.stop_consuming()

    ch.basic_consume(queue, on_message)
    ch.start_consuming()
    result = meter.result(*state)
    conn.close()
    return result


def latency_producer(address, queue: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` persistent publishes at `rate` a second, each stamped; the due ones in one write."""
    from tools.bench.latency import paced

    conn, ch = _channel(address, queue)
    publish, pad = _publisher(ch, queue), payload(MESSAGE_SIZE - 8)
    publish(bytes(8) + pad)
    created.set()
    go.wait()
    stamp, now = struct.Struct("<q").pack, time.monotonic_ns

    def burst(n: int) -> None:
        for i in range(1, n + 1):
            publish(stamp(now()) + pad, i == n)

    achieved = paced(burst, rate, count)
    conn.close()
    return {"achieved": achieved}


def latency_consumer(address, queue: str, count: int, ready) -> np.ndarray:
    """Client process: basic_consume `queue` (prefetch 1000); send -> delivery in ms for `count` stamped messages."""
    conn, ch = _channel(address, queue)
    ch.basic_qos(prefetch_count=PREFETCH)
    out, now, seen = [], time.monotonic_ns, [0]

    def on_message(channel, method, _props, body) -> None:
        sent = int.from_bytes(body[:8], "little", signed=True)
        seen[0] += 1
        if not seen[0] % ACK_EVERY:
            channel.basic_ack(method.delivery_tag, multiple=True)
        if sent == 0:
            ready.set()
            return
        out.append(now() - sent)
        if len(out) >= count:
            channel.basic_ack(method.delivery_tag, multiple=True)
            channel.stop_consuming()

    ch.basic_consume(queue, on_message)
    ch.start_consuming()
    conn.close()
    return np.array(out, dtype=np.float64) / 1e6


def _delete(address, queue: str) -> None:
    conn, ch = _channel(address, queue)
    ch.queue_delete(queue)
    conn.close()


def bench(cfg, workdir: Path, log) -> tuple[list[Result], list]:
    """Every RabbitMQ test of the run, against one rabbitmq-server."""
    from tools.bench import latency
    from tools.bench.servers import RabbitServer

    results = Rows(SYSTEM, log)
    with RabbitServer(workdir) as server:
        addr = server.address
        for batch, n in ((1, cfg.batch1_messages), (50, cfg.messages)):
            res = ClientProcess(produce, addr, f"produce-{batch}", n, batch).result(cfg.timeout(n))
            results.add("produce", f"pika, persistent, no confirms, batch {batch}", batch, res)
        _delete(addr, "produce-1")  # disk and memory: only the consumer test's queue is kept
        res = ClientProcess(consume, addr, "produce-50", cfg.messages).result(cfg.timeout(cfg.messages))
        results.add("consume", f"pika basic_consume, prefetch {PREFETCH}, ack every {ACK_EVERY}", None, res)
        _delete(addr, "produce-50")
        lat = latency.measure(SYSTEM, "pika, persistent, no confirms; basic_consume prefetch 1000",
                              latency_producer, latency_consumer, (addr, "latency"), cfg, log)
    return results, [lat]
