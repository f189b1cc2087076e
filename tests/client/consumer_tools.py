"""Test data for the consumer tests: topics and batches written with the raw protocol.

Produced through the blocking `BrokerConnection` and `records.build_batch`, not
mmlog's Producer, so that the consumer's tests depend on the codec and the broker
only, and so that they can write what a producer would not: transaction markers
(through WriteTxnMarkers, as a transaction coordinator does), gzip batches,
LogAppendTime.
"""

from __future__ import annotations

import functools
import struct

from crc32c import crc32c

from mmlog.client.connection import BrokerConnection
from mmlog.protocol import records as rec
from mmlog.protocol.messages import create_topics, delete_topics, init_producer_id, write_txn_markers
from mmlog.protocol.messages import produce as produce_api
from mmlog.testing import connections


connect = functools.partial(connections.connect, timeout=30, client_id="consumer-tests")


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


def produce_batches(broker, topic: str, partition: int, batches, transactional_id: str | None = None) -> list[int]:
    """Produce whole batches (bytearrays) to one partition; return their base offsets. Transactional batches
    need the request to name a transactional id, as Kafka's produce does."""
    bases = []
    with connect(broker) as conn:
        for batch in batches:
            body = conn.request(produce_api.API_KEY, 8, produce_api.REQUEST(
                acks=1, timeout_ms=30000, transactional_id=transactional_id,
                topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]))
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


def new_producer_id(broker) -> int:
    """A producer id from InitProducerId (no transactional id: the coordinator is not needed)."""
    with connect(broker) as conn:
        body = conn.request(init_producer_id.API_KEY, 1, init_producer_id.REQUEST(
            transactional_id=None, transaction_timeout_ms=60000))
    assert body.error_code == 0, body
    return body.producer_id


def write_markers(address, markers: list[tuple], timeout: float = 30.0):
    """Send WriteTxnMarkers as the coordinator would: markers are (producer id, epoch, commit, coordinator
    epoch, {topic: [partitions]}); returns {(producer id, topic, partition): error code}."""
    if not isinstance(address, str):
        address = address.bootstrap
    host, port = address.rsplit(":", 1)
    request = write_txn_markers.REQUEST(markers=[
        {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit, "coordinator_epoch": ce,
         "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        for pid, epoch, commit, ce, topics in markers])
    with BrokerConnection(host, int(port), client_id="txn-coordinator-test", timeout=timeout) as conn:
        body = conn.request(write_txn_markers.API_KEY, 0, request)
    return {(m.producer_id, t.name, p.partition_index): p.error_code
            for m in body.markers for t in m.topics for p in t.partitions}


def write_marker(broker, topic: str, partition: int, pid: int, epoch: int = 0, commit: bool = True,
                 coordinator_epoch: int = 0) -> None:
    """End pid's transaction on one partition; asserts the leader took the marker."""
    errors = write_markers(broker, [(pid, epoch, commit, coordinator_epoch, {topic: [partition]})])
    assert errors == {(pid, topic, partition): 0}, errors


class TxnProducer:
    """A transactional producer made of raw batches: its id, epoch and sequences per partition."""

    def __init__(self, broker, epoch: int = 0) -> None:
        self.broker = broker
        self.pid = new_producer_id(broker)
        self.epoch = epoch
        self.seqs: dict[tuple[str, int], int] = {}

    def send(self, topic: str, partition: int, records) -> int:
        """Produce records in one transactional batch; return its base offset."""
        seq = self.seqs.get((topic, partition), 0)
        batch = rec.build_batch(records, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=seq,
                                transactional=True)
        self.seqs[topic, partition] = seq + len(records)
        return produce_batches(self.broker, topic, partition, [batch], transactional_id=f"raw-{self.pid}")[0]

    def end(self, topic: str, partition: int, commit: bool) -> None:
        write_marker(self.broker, topic, partition, self.pid, self.epoch, commit)
