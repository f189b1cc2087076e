"""Batch writes: rows written are read back exactly, in order within a partition; bad input fails."""

from __future__ import annotations

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from mmlog.client import Admin
from mmlog.spark.options import WriteOptions
from mmlog.spark.writer import BatchWriter, WriteReport

SCHEMA = "key string, value binary, partition int, headers array<struct<key: string, value: binary>>"


def writer(df, bootstrap, **options):
    w = df.write.format("mmlog").option("bootstrap", bootstrap).mode("append")
    for name, value in options.items():
        w = w.option(name, value)
    return w


def read_back(spark, bootstrap, topic):
    return spark.read.format("mmlog").option("bootstrap", bootstrap).option("subscribe", topic) \
        .option("includeHeaders", "true").load()


def test_rows_written_are_read_back_exactly_and_in_order(spark, broker, topic):
    rows = []
    for i in range(600):
        headers = [("n", b"%d" % i), ("null", None)] if i % 5 == 0 else []  # runs with and without headers
        partition = None if i % 7 == 3 else i % 3  # null: the key picks the partition
        value = None if i % 50 == 49 else b"%d:" % i + bytes([i % 256]) * (i % 40)
        rows.append((f"key-{i % 11}", value, partition, headers))
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1)  # one task: its row order is the send order
    writer(df, broker.bootstrap, topic=topic).save()
    got = read_back(spark, broker.bootstrap, topic).collect()
    assert len(got) == 600
    assert sorted((r.key.decode(), r.value or b"", [(h.key, h.value) for h in r.headers or ()]) for r in got) == \
        sorted((k, v or b"", [tuple(h) for h in hs]) for k, v, _, hs in rows)
    where = {r.value: (r.partition, r.offset) for r in got if r.value is not None}
    for k, v, p, _ in rows:
        if v is not None and p is not None:
            assert where[v][0] == p
    for p in range(3):  # each partition holds its rows in row order
        sent = [v for _, v, _, _ in rows if v is not None and where[v][0] == p]
        assert sorted(sent, key=lambda v: where[v][1]) == sent


def test_a_topic_column_routes_rows_and_the_topic_option_overrides_it(spark, broker):
    with Admin(broker.bootstrap) as admin:
        for name in ("route-a", "route-b", "route-c"):
            admin.create_topic(name, partitions=1)
    df = spark.createDataFrame([("route-a" if i % 3 else "route-b", f"v{i}") for i in range(30)],
                               "topic string, value string")
    writer(df, broker.bootstrap).save()
    writer(df, broker.bootstrap, topic="route-c").save()
    counts = {t: read_back(spark, broker.bootstrap, t).count() for t in ("route-a", "route-b", "route-c")}
    assert counts == {"route-a": 20, "route-b": 10, "route-c": 30}
    assert sorted(r.value for r in read_back(spark, broker.bootstrap, "route-b").collect()) == sorted(
        b"v%d" % i for i in range(0, 30, 3))


def test_a_failed_task_fails_the_write(spark, broker, topic):
    df = spark.createDataFrame([(b"x", 7)], "value binary, partition int")
    with pytest.raises(Exception, match="has 3 partitions"):
        writer(df, broker.bootstrap, topic=topic).save()


@pytest.mark.parametrize("ddl, options, mode, message", [
    ("key binary", {"topic": "t"}, "append", "needs a value column"),
    ("value binary", {}, "append", "no topic column and no topic option"),
    ("value int", {"topic": "t"}, "append", "column value must be binary or string"),
    ("value binary, partition string", {"topic": "t"}, "append", "column partition must be int"),
    ("value binary", {"topic": "t"}, "overwrite", "can only be appended to"),
])
def test_bad_writes_fail_on_the_driver_with_a_clear_error(spark, broker, ddl, options, mode, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=message):
        writer(df, broker.bootstrap, **options).mode(mode).save()


def test_an_abort_says_what_finished_tasks_committed_stays_committed(caplog):
    writer = BatchWriter(WriteOptions("127.0.0.1:1", "t", 1000), StructType([StructField("value", BinaryType())]))
    first, second = WriteReport(), WriteReport()
    first.note("t", 0, 3, 10, 12)
    second.note("t", 0, 2, 13, 14)
    second.note("t", 1, 1, 0, 0)
    with caplog.at_level("INFO", logger="mmlog.spark"):
        writer.abort([first, None, second])  # None: a task that failed
        writer.commit([])
    aborted, committed = caplog.records
    assert aborted.levelname == "WARNING" and "stays committed" in aborted.getMessage()
    assert "t-0: 5 records at 10..14, t-1: 1 records at 0..0" in aborted.getMessage()
    assert committed.getMessage() == "mmlog write committed: no records"
