"""DeleteRecords on a standalone broker: the log start moves, whole segments below it go, reads and
ListOffsets honour it; Kafka's AdminClients, mmlog's Admin and CLI; Kafka's errors for bad offsets."""

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import KafkaAdminClient

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.producer import Producer
from mmlog.errors import OffsetOutOfRange
from mmlog.protocol.messages import delete_records, fetch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def fill(broker, admin, topic, count=100, partitions=1):
    """`count` records of ~100 bytes per partition, one batch each, in 1 KiB segments."""
    admin.create_topic(topic, partitions, {"segment.bytes": "1024"})
    with Producer(broker.bootstrap, linger_ms=0, batch_size=1) as producer:
        for p in range(partitions):
            for i in range(count):
                producer.send(topic, b"v%03d" % i + b"." * 96, partition=p).result(10)


def fetch_at(broker, topic, offset, partition=0):
    with connect(broker) as conn:
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                             "partition_max_bytes": 1 << 20}]}]))
    return body.responses[0].partitions[0]


def test_the_log_start_moves_whole_segments_below_it_go_and_reads_honour_it(broker, admin):
    fill(broker, admin, "trim")
    directory = broker.data_dir / "trim-0"
    segments_before = sorted(directory.glob("*.log"))
    assert admin.delete_records("trim", {0: 50}) == {0: 50}
    assert admin.earliest_offsets("trim") == {0: 50}
    assert admin.latest_offsets("trim") == {0: 100}
    remaining = sorted(directory.glob("*.log"))
    assert len(remaining) < len(segments_before)
    assert int(remaining[0].stem) <= 50 < int(remaining[1].stem)  # the segment holding 50 stays, whole
    assert fetch_at(broker, "trim", 49).error_code == OffsetOutOfRange.code
    assert fetch_at(broker, "trim", 50).error_code == 0
    got = []
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("trim", 0)])
        deadline = time.monotonic() + 20
        while len(got) < 50 and time.monotonic() < deadline:
            got += consumer.poll(1)
    assert [r.offset for r in got] == list(range(50, 100))
    assert admin.delete_records("trim", {0: 20}) == {0: 50}  # never backwards: the log start stays


def test_confluent_kafka_deletes_records_and_gets_offset_out_of_range_past_the_high_watermark(broker, admin):
    fill(broker, admin, "ck-trim", 20)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    [done] = client.delete_records([TopicPartition("ck-trim", 0, 5)]).values()
    assert done.result(10).low_watermark == 5
    [past] = client.delete_records([TopicPartition("ck-trim", 0, 21)]).values()
    with pytest.raises(KafkaException) as raised:
        past.result(10)
    assert raised.value.args[0].name() == "OFFSET_OUT_OF_RANGE"
    [everything] = client.delete_records([TopicPartition("ck-trim", 0, -1)]).values()  # OFFSET_END
    assert everything.result(10).low_watermark == 20
    assert admin.earliest_offsets("ck-trim") == admin.latest_offsets("ck-trim") == {0: 20}


def test_kafka_python_deletes_records(broker, admin):
    fill(broker, admin, "kp-trim", 10, partitions=2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.delete_records({KafkaPythonTopicPartition("kp-trim", 0): 3,
                                        KafkaPythonTopicPartition("kp-trim", 1): 7})
    finally:
        client.close()
    assert {tp.partition: r["low_watermark"] for tp, r in result.items()} == {0: 3, 1: 7}
    assert admin.earliest_offsets("kp-trim") == {0: 3, 1: 7}


@pytest.mark.parametrize("offset", [11, -2])
def test_a_bad_offset_is_offset_out_of_range_and_changes_nothing(broker, admin, offset):
    topic = f"trim-bad{offset}"
    fill(broker, admin, topic, 10)
    with connect(broker) as conn:
        body = conn.request(delete_records.API_KEY, 1, delete_records.REQUEST(timeout_ms=1000, topics=[
            {"name": topic, "partitions": [{"partition_index": 0, "offset": offset},
                                           {"partition_index": 3, "offset": 1}]}]))
    assert [(p.partition_index, p.error_code, p.low_watermark) for p in body.topics[0].partitions] == [
        (0, OffsetOutOfRange.code, -1), (3, 3, -1)]  # and UNKNOWN_TOPIC_OR_PARTITION for a partition not there
    assert admin.earliest_offsets(topic) == {0: 0}


def test_the_log_start_survives_a_restart(tmp_path):
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        fill(b, admin, "trim-kept", 30)
        admin.delete_records("trim-kept", {0: 25})
    with EmbeddedBroker(tmp_path, processors=1) as b, Admin(b.bootstrap) as admin:
        assert admin.earliest_offsets("trim-kept") == {0: 25}
        assert fetch_at(b, "trim-kept", 24).error_code == OffsetOutOfRange.code


def test_the_cli_deletes_records_of_every_partition_or_some(broker, admin):
    fill(broker, admin, "cli-trim", 10, partitions=2)

    def topics(*args):
        return subprocess.run([sys.executable, "-m", "mmlog", "topics", "--bootstrap", broker.bootstrap,
                               "--timeout", "5", *args], capture_output=True, text=True, timeout=60)

    some = topics("delete-records", "cli-trim", "--before", "4", "--partition", "1")
    assert some.returncode == 0 and some.stdout.splitlines() == ["partition 1\tlow watermark 4"]
    every = topics("delete-records", "cli-trim", "--before", "-1")
    assert every.stdout.splitlines() == ["partition 0\tlow watermark 10", "partition 1\tlow watermark 10"]
    past = topics("delete-records", "cli-trim", "--before", "99")
    assert past.returncode == 1 and past.stderr.startswith("mmlog: error: OffsetOutOfRange: cli-trim-0")
