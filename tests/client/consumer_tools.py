"""Test data for the consumer tests: topics and batches written with the raw protocol.

Produced through the blocking `BrokerConnection` and `records.build_batch`, not
mmlog's Producer, so that the consumer's tests depend on the codec and the broker
only, and so that they can write what a producer would not: control batches,
gzip batches, LogAppendTime.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from mmlog.client.connection import BrokerConnection
from mmlog.protocol import records as rec
from mmlog.protocol.messages import create_topics, delete_topics
from mmlog.protocol.messages import produce as produce_api


def connect(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), client_id="consumer-tests")


def create_topic(broker, name: str, partitions: int = 1) -> None:
    with connect(broker) as conn:
        body = conn.request(create_topics.API_KEY, 4, create_topics.REQUEST(timeout_ms=30000, topics=[{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}]))
    assert body.topics[0].error_code == 0, body.topics[0]


def delete_topic(broker, name: str) -> None:
    with connect(broker) as conn:
        body = conn.request(delete_topics.API_KEY, 3, delete_topics.REQUEST(topic_names=[name], timeout_ms=30000))
    assert body.responses[0].error_code == 0, body.responses[0]


def produce_batches(broker, topic: str, partition: int, batches) -> list[int]:
    """Produce whole batches (bytearrays) to one partition; return their base offsets."""
    bases = []
    with connect(broker) as conn:
        for batch in batches:
            body = conn.request(produce_api.API_KEY, 8, produce_api.REQUEST(acks=1, timeout_ms=30000, topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]))
            result = body.responses[0].partition_responses[0]
            assert result.error_code == 0, result
            bases.append(result.base_offset)
    return bases


def produce(broker, topic: str, partition: int, records, **batch_options) -> int:
    """Produce records ((key, value[, headers]) tuples or Record objects) as one batch; return its base offset."""
    return produce_batches(broker, topic, partition, [rec.build_batch(records, **batch_options)])[0]


def values(n: int, start: int = 0, prefix: bytes = b"v") -> list[tuple]:
    return [(None, prefix + b"%d" % i) for i in range(start, start + n)]


def with_attributes(batch: bytearray, set_bits: int) -> bytearray:
    """The batch with attribute bits set (e.g. control, LogAppendTime) and its CRC-32C fixed."""
    out = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", out, rec.ATTRIBUTES)
    struct.pack_into(">h", out, rec.ATTRIBUTES, attributes | set_bits)
    struct.pack_into(">I", out, rec.CRC_OFFSET, crc32c(memoryview(out)[rec.CRC_START:]))
    return out


def control_batch(base_offset: int = 0) -> bytearray:
    """A transaction marker batch (commit): control bit set, one record with a 4-byte key."""
    batch = rec.build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], base_offset=base_offset,
                            producer_id=7, producer_epoch=0)
    return with_attributes(batch, rec.CONTROL_BIT | rec.TRANSACTIONAL_BIT)
