"""kafka-python 3.x: the idempotent default producer (InitProducerId) and a consumer, against mmlog."""

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402


def test_idempotent_producer_and_consumer_round_trip(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-roundtrip", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # enable_idempotence defaults to True in 3.x
    assert producer.config["enable_idempotence"]
    futures = [producer.send("kp-roundtrip", key=b"k%d" % (i % 10), value=b"v%d" % i,
                             headers=[("n", b"%d" % i)]) for i in range(2000)]
    producer.flush(30)
    sent = {}
    for i, f in enumerate(futures):
        meta = f.get(timeout=30)
        sent[(meta.partition, meta.offset)] = (b"k%d" % (i % 10), b"v%d" % i, [("n", b"%d" % i)])
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    consumer.assign([TopicPartition("kp-roundtrip", 0), TopicPartition("kp-roundtrip", 1)])
    got = {(m.partition, m.offset): (m.key, m.value, m.headers) for m in consumer}
    consumer.close()
    assert got == sent


def test_consumer_seeks_by_timestamp_and_to_the_end(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("kp-times", value=b"%d" % i, timestamp_ms=1_000_000 + i * 1000)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition("kp-times", 0)
    consumer.assign([tp])
    found = consumer.offsets_for_times({tp: 1_004_500})[tp]
    assert found.offset == 5 and found.timestamp == 1_005_000  # the record's timestamp, as Kafka answers
    assert consumer.offsets_for_times({tp: 9_999_999})[tp] is None
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 10
    consumer.close()
