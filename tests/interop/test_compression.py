"""Every codec across clients: mmlog's producer read by confluent-kafka, kafka-python and kcat, and the reverse."""

from __future__ import annotations

import subprocess
import time

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from mmlog import Consumer, Producer
from tests.interop.conftest import require

CODECS = ["gzip", "snappy", "lz4", "zstd"]
EVENTS = [b'{"event": "click", "user": %d, "page": "/item/%d"}' % (i, i % 17) for i in range(500)]


def produce_with_mmlog(bootstrap: str, topic: str, codec: str) -> None:
    with Producer(bootstrap, compression_type=codec, linger_ms=20) as producer:
        for i, value in enumerate(EVENTS):
            producer.send(topic, value, key=b"k%d" % i, partition=0)


def read_with_mmlog(bootstrap: str, topic: str, n: int, bulk: bool) -> list[bytes]:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest")
    consumer.assign([(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < n and time.monotonic() < deadline:
            if bulk:
                for arrays in consumer.poll_batch(0.5):
                    got += arrays.values()
            else:
                got += [r.value for r in consumer.poll(0.5)]
    finally:
        consumer.close()
    return got


def read_with_kafka_python(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_mmlog_produces_each_codec_for_confluent_kafka_and_kafka_python(broker, codec):
    topic = f"mm-{codec}"
    produce_with_mmlog(broker.bootstrap, topic, codec)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{codec}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(EVENTS) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    assert got == EVENTS
    assert read_with_kafka_python(broker.bootstrap, topic) == EVENTS


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_and_kafka_python_codecs_read_by_mmlog_iterator_and_bulk(broker, codec):
    topic = f"in-{codec}"
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                         "linger.ms": 20})
    for value in EVENTS:
        producer.produce(topic, value, partition=0)
    assert producer.flush(20) == 0
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for value in EVENTS:
        kp.send(topic, value, partition=0)
    kp.flush(20)
    kp.close()
    assert read_with_mmlog(broker.bootstrap, topic, 2 * len(EVENTS), bulk=False) == EVENTS * 2
    assert read_with_mmlog(broker.bootstrap, topic, 2 * len(EVENTS), bulk=True) == EVENTS * 2


def test_mixed_codecs_in_one_partition_are_read_by_every_client(broker):
    topic = "mixed-codecs"
    for codec in ["none", *CODECS]:
        produce_with_mmlog(broker.bootstrap, topic, codec)
    expected = EVENTS * 5
    assert read_with_mmlog(broker.bootstrap, topic, len(expected), bulk=True) == expected
    assert read_with_kafka_python(broker.bootstrap, topic) == expected


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_reads_each_codec_mmlog_wrote(broker, codec):
    kcat = require("kcat")
    topic = f"kcat-{codec}"
    produce_with_mmlog(broker.bootstrap, topic, codec)
    out = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"],
                         capture_output=True, timeout=60, check=True)
    assert out.stdout.splitlines() == EVENTS
