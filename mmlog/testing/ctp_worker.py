"""A consume-transform-produce worker with librdkafka's transactions, for the exactly-once test.

    python -m mmlog.testing.ctp_worker BOOTSTRAP INPUT OUTPUT GROUP TXN_ID PARTITIONS

Reads INPUT from the group's committed offsets (read_committed, partitions assigned by
hand), writes each value with a "!" to OUTPUT and commits the input offsets in the same
transaction, 20 records at a time. Exits 0 after 3 s without input, 3 on any error (the
test restarts it: the restart's init_transactions aborts what this one left open).
"""

from __future__ import annotations

import sys
import time

import confluent_kafka
from confluent_kafka import TopicPartition


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str, partitions: int) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "isolation.level": "read_committed", "enable.auto.commit": False,
                                         "auto.offset.reset": "earliest"})
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                         "linger.ms": 1, "transaction.timeout.ms": 10_000})
    producer.init_transactions(30)
    tps = [TopicPartition(source, p) for p in range(partitions)]
    consumer.assign(consumer.committed(tps, timeout=30))
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 3:
        msgs = [m for m in consumer.consume(20, timeout=0.2) if not m.error()]
        if not msgs:
            continue
        idle_since = time.monotonic()
        producer.begin_transaction()
        for m in msgs:
            producer.produce(sink, m.value() + b"!", partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    consumer.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:6], int(sys.argv[6])))
    except Exception as exc:  # noqa: BLE001 - any failure: the test starts a new worker
        print(f"worker failed: {exc!r}", file=sys.stderr)
        sys.exit(3)
