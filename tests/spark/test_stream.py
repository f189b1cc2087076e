"""Streaming reads: micro-batches capped by maxOffsetsPerTrigger, and a query stopped part-way and restarted
from its checkpoint that writes every record to a file sink exactly once."""

from __future__ import annotations

import time


def query(spark, bootstrap, topic, out, checkpoint, *, per_trigger: int, available_now: bool):
    stream = (spark.readStream.format("mmlog").option("bootstrap", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger)).load()
              .selectExpr("partition", "offset", "value")
              .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint)))
    return stream.trigger(availableNow=True).start() if available_now else \
        stream.trigger(processingTime="100 milliseconds").start()


def input_rows(q) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_a_restarted_query_neither_loses_nor_repeats_input(spark, broker, topic, produce, tmp_path):
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(topic, [(i % 3, None, b"first-%d" % i, []) for i in range(300)])

    first = query(spark, broker.bootstrap, topic, out, checkpoint, per_trigger=60, available_now=False)
    deadline = time.monotonic() + 60
    while len(input_rows(first)) < 2 and time.monotonic() < deadline:  # stopped part-way through 300
        time.sleep(0.05)
    first.stop()
    assert 0 < sum(input_rows(first)) < 300 and max(input_rows(first)) <= 60

    produce(topic, [(i % 3, None, b"second-%d" % i, []) for i in range(150)])
    second = query(spark, broker.bootstrap, topic, out, checkpoint, per_trigger=100, available_now=True)
    assert second.awaitTermination(120)
    assert max(input_rows(second)) <= 100 and len(input_rows(second)) >= 2

    rows = spark.read.parquet(str(out)).collect()  # through the sink's log: committed batches only
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(3) for o in range(150)]
    expected = {b"first-%d" % i for i in range(300)} | {b"second-%d" % i for i in range(150)}
    assert {r.value for r in rows} == expected


def test_available_now_reads_what_there_is_and_stops(spark, broker, topic, produce, tmp_path):
    produce(topic, [(i % 3, None, b"%d" % i, []) for i in range(90)])
    q = query(spark, broker.bootstrap, topic, tmp_path / "out", tmp_path / "cp", per_trigger=1000, available_now=True)
    assert q.awaitTermination(120)
    assert input_rows(q) == [90]
