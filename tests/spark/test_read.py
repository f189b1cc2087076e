"""Batch reads through Spark: every record, byte for byte, within the offsets asked for, in as many tasks
as the ranges call for."""

from __future__ import annotations

import json
import random

import pytest

from mmlog.client import Admin


def records(n_per_partition: int, seed: int = 6) -> list[tuple]:
    """(partition, key, value, headers) with null, empty and binary keys and values, and some headers."""
    rng = random.Random(seed)
    out = []
    for i in range(3 * n_per_partition):
        key = [None, b"", bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 20)))][i % 3]
        value = None if i % 17 == 5 else bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 50, 300])))
        headers = [("trace", bytes([i % 256])), ("empty", None)] if i % 4 == 0 else []
        out.append((i % 3, key, value, headers))
    return out


def load(spark, bootstrap, topic, **options):
    reader = spark.read.format("mmlog").option("bootstrap", bootstrap).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def offsets(df) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_every_record_of_a_three_partition_topic_byte_for_byte(spark, broker, topic, produce):
    sent = records(100)
    metadata = produce(topic, sent, timestamp=1_700_000_000_123)
    expected = {(md.partition, md.offset): (key, value, [(k, v) for k, v in headers])
                for md, (_, key, value, headers) in zip(metadata, sent)}
    df = load(spark, broker.bootstrap, topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = df.selectExpr("*", "unix_millis(timestamp) AS ms").collect()
    got = {(r.partition, r.offset): (r.key, r.value, [(h.key, h.value) for h in r.headers or ()]) for r in rows}
    assert {r.headers is None for r in rows if not expected[r.partition, r.offset][2]} == {True}
    assert len(rows) == 300 and got == expected
    assert {(r.topic, r.ms, r.timestampType) for r in rows} == {(topic, 1_700_000_000_123, 0)}
    assert dict(df.groupBy("partition").count().collect()) == {0: 100, 1: 100, 2: 100}
    assert load(spark, broker.bootstrap, topic).columns[-1] == "timestampType"  # headers only when asked


def test_starting_and_ending_offsets_are_honoured(spark, broker, topic, produce):
    produce(topic, [(i % 3, None, b"v%d" % i, []) for i in range(150)])  # 50 per partition
    df = load(spark, broker.bootstrap, topic,
              startingOffsets=json.dumps({topic: {"0": 10, "1": -2}}),  # partition 2: the default, earliest
              endingOffsets=json.dumps({topic: {"0": 20, "2": 5}}))  # partition 1: the default, latest
    assert offsets(df) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(50)] + [(2, o) for o in range(5)]
    values = {r.offset: r.value for r in df.where("partition = 0").collect()}
    assert values == {o: b"v%d" % (3 * o) for o in range(10, 20)}


def test_large_ranges_are_split_into_several_tasks(spark, broker, topic, produce):
    produce(topic, [(i % 3, None, b"%d" % i, []) for i in range(300)])
    every = [(p, o) for p in range(3) for o in range(100)]
    df = load(spark, broker.bootstrap, topic, maxRecordsPerPartition="30")
    assert df.rdd.getNumPartitions() == 12  # 100 offsets a partition: 4 ranges of 25
    assert offsets(df) == every
    wide = load(spark, broker.bootstrap, topic, minPartitions="10")
    assert wide.rdd.getNumPartitions() >= 10 and offsets(wide) == every


def test_a_pattern_subscribes_to_every_topic_it_matches_whole(spark, broker, produce):
    with Admin(broker.bootstrap) as admin:
        for name in ("pattern-a", "pattern-b", "pattern-bb"):
            admin.create_topic(name, partitions=2)
    for name in ("pattern-a", "pattern-b", "pattern-bb"):
        produce(name, [(i % 2, None, name.encode(), []) for i in range(10)])
    df = spark.read.format("mmlog").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("subscribePattern", "pattern-[ab]").load()
    assert dict(df.groupBy("topic").count().collect()) == {"pattern-a": 10, "pattern-b": 10}


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": "soon"}, "option startingOffsets: want earliest, latest or JSON"),
    ({"endingOffsets": "earliest"}, "option endingOffsets: 'earliest' is not allowed"),
    ({"fetchMaxBytes": "lots"}, "option fetchMaxBytes: want an integer"),
    ({"subscribe": "no-such-topic"}, "topic 'no-such-topic' does not exist"),
])
def test_bad_options_fail_the_query_with_a_clear_error(spark, broker, topic, options, message):
    with pytest.raises(Exception, match=message):
        load(spark, broker.bootstrap, topic, **options).collect()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_compressed_topic_reads_like_any_other(spark, broker, codec):
    from mmlog import Producer

    topic = f"spark-{codec}"
    values = [b'{"n": %d, "text": "%s"}' % (i, b"abc" * (i % 9)) for i in range(400)]
    with Producer(broker.bootstrap, compression_type=codec, linger_ms=20) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
    rows = load(spark, broker.bootstrap, topic).select("offset", "value").collect()
    assert [bytes(r.value) for r in sorted(rows)] == values


def test_committed_data_only_by_default_and_everything_with_read_uncommitted(spark, broker):
    from tests.client.consumer_tools import TxnProducer, create_topic, produce

    topic = "spark-transactions"
    create_topic(broker, topic)
    a, b, c = TxnProducer(broker), TxnProducer(broker), TxnProducer(broker)
    produce(broker, topic, 0, [(None, b"p0")])
    a.send(topic, 0, [(None, b"a0")])
    b.send(topic, 0, [(None, b"b0")])
    a.end(topic, 0, commit=False)
    b.end(topic, 0, commit=True)
    c.send(topic, 0, [(None, b"c0")])  # open: read_committed ends before it
    produce(broker, topic, 0, [(None, b"p1")])

    def values(**options):
        return [bytes(r.value) for r in load(spark, broker.bootstrap, topic, **options).orderBy("offset").collect()]

    assert values() == [b"p0", b"b0"]
    assert values(readCommitted="true") == [b"p0", b"b0"]
    assert values(isolation_level="read_uncommitted") == [b"p0", b"a0", b"b0", b"c0", b"p1"]
    with pytest.raises(Exception, match="option isolation_level: want read_committed or read_uncommitted"):
        values(isolation_level="serializable")
