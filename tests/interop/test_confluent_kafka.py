"""confluent-kafka (librdkafka 2.x from PyPI): admin, producer and assign() consumer against mmlog."""

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RECORDS = 100_000


def consume_all(bootstrap, topic, partitions, expected, timeout=120):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got


def test_admin_client_creates_and_deletes_topics(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("ck-admin", 3, 1, config={"retention.ms": "60000"})]).values():
        assert future.result(30) is None
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["ck-admin"].partitions) == 3
    duplicate = admin.create_topics([NewTopic("ck-admin", 1, 1)])["ck-admin"]
    with pytest.raises(confluent_kafka.KafkaException) as err:
        duplicate.result(30)
    assert err.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    for future in admin.delete_topics(["ck-admin"]).values():
        assert future.result(30) is None
    assert "ck-admin" not in admin.list_topics(timeout=10).topics


def test_100k_keyed_records_with_headers_round_trip_byte_for_byte(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ck-100k", 4, 1)])["ck-100k"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5, "acks": "all"})
    sent = {}
    failures = []

    def delivered(record):
        def report(err, msg):
            if err is not None:
                failures.append(err)
            else:
                sent[(msg.partition(), msg.offset())] = record

        return report

    for i in range(RECORDS):
        key = b"key-%d" % (i % 997)
        value = (b"value-%d-" % i) * (1 + i % 7)
        headers = [("seq", b"%d" % i), ("empty", b"")]
        producer.produce("ck-100k", key=key, value=value, headers=headers,
                         on_delivery=delivered((key, value, headers)))
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures
    assert len(sent) == RECORDS

    got = consume_all(broker.bootstrap, "ck-100k", 4, RECORDS)
    received = {(m.partition(), m.offset()): (m.key(), m.value(), m.headers()) for m in got}
    assert received == sent
    for p in range(4):  # offsets dense per partition
        offsets = sorted(o for (q, o) in received if q == p)
        assert offsets == list(range(len(offsets)))
