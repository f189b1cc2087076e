"""mmlog through bare Kafka frames: the broker's share of end-to-end latency, without a client library.

Blocking sockets and mmlog's sans-IO codec, one request at a time, no threads: the producer sends each
tick's due messages as one batch in one Produce v8 (acks=1) and reads its answer; the consumer long-polls
Fetch v11 (max_wait 500 ms, min_bytes 1) from the offset after the last record it saw. What these clients
add is a codec call and a round trip each way, so the latency left is the broker's and the host's,
read beside the relay's floor (relay.py) and the client libraries' rows.
"""

from __future__ import annotations

import struct
import time

import numpy as np

from tools.bench.common import MESSAGE_SIZE, payload

MAX_WAIT_MS = 500
FETCH_BYTES = 1 << 20


def _connection(bootstrap: str):
    from mmlog.client.connection import BrokerConnection, parse_bootstrap

    [(host, port)] = parse_bootstrap(bootstrap)
    return BrokerConnection(host, port, client_id="bench-frames")


def _produce(conn, topic: str, values: list[bytes]) -> None:
    from mmlog.protocol import records
    from mmlog.protocol.messages import produce

    batch = records.build_batch([(None, v) for v in values])
    body = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    code = body.responses[0].partition_responses[0].error_code
    if code:
        raise RuntimeError(f"Produce to {topic} failed: error {code}")


def latency_producer(bootstrap: str, topic: str, rate: float, count: int, created, go) -> dict:
    """Client process: `count` stamped records at `rate` a second, each tick's due ones in one Produce."""
    from mmlog.client.admin import Admin
    from tools.bench.latency import paced

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, 1)
    pad = payload(MESSAGE_SIZE - 8)
    stamp, now = struct.Struct("<q").pack, time.monotonic_ns
    conn = _connection(bootstrap)
    try:
        _produce(conn, topic, [bytes(8) + pad])
        created.set()
        go.wait()
        return {"achieved": paced(lambda n: _produce(conn, topic, [stamp(now()) + pad for _ in range(n)]),
                                  rate, count)}
    finally:
        conn.close()


def latency_consumer(bootstrap: str, topic: str, count: int, ready) -> np.ndarray:
    """Client process: long-polling Fetches from offset 0 until `count` paced records came; send -> receipt
    (the Fetch's answer read) in ms."""
    from mmlog.protocol import records
    from mmlog.protocol.messages import fetch

    conn = _connection(bootstrap)
    stamps, arrived, offset = [], [], 0
    try:
        while len(stamps) <= count:  # the paced ones and the stamp-0 one
            body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
                max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_BYTES, topics=[{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": FETCH_BYTES}]}]))
            at = time.monotonic_ns()
            part = body.responses[0].partitions[0]
            if part.error_code:
                raise RuntimeError(f"Fetch of {topic} at {offset} failed: error {part.error_code}")
            data = bytes(part.records or b"")
            for pos, header in records.iter_batches(data):
                for record in records.decode_records(data, pos):
                    if record.offset >= offset:
                        stamps.append(record.value[:8])
                        arrived.append(at)
                offset = max(offset, header.next_offset)
            if stamps:
                ready.set()
    finally:
        conn.close()
    from tools.bench.latency import received_ms

    return received_ms(stamps, arrived, count)
