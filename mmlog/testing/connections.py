"""Raw request/response connections to a test broker, and the fetches tests and soaks read a partition with."""

from __future__ import annotations

from mmlog.client.connection import BrokerConnection
from mmlog.protocol.messages import fetch
from mmlog.protocol.records import decode_records, iter_batches


def connect(broker, timeout: float = 10, client_id: str = "mmlog") -> BrokerConnection:
    """A blocking connection to the broker's first listener, for requests a test builds itself."""
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=timeout, client_id=client_id)


def fetch_one(conn, topic, partition, offset, version=11, max_wait_ms=0):
    body = conn.request(fetch.API_KEY, version, fetch.REQUEST(
        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                  "partition_max_bytes": 1 << 20}]}]))
    return body.responses[0].partitions[0]


def read_all(conn, topic):
    """Every record of the topic's partition 0, fetched from offset 0 until a fetch comes back empty."""
    records, offset = [], 0
    while True:
        part = fetch_one(conn, topic, 0, offset)
        data = bytes(part.records)
        if not data:
            return records
        for pos, header in iter_batches(data):
            records += [r for r in decode_records(data, pos) if r.offset >= offset]
        offset = records[-1].offset + 1
