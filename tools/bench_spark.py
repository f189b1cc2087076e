"""Spark reads through the mmlog source beside a synthetic in-memory Arrow source, in one session.

    python tools/bench_spark.py [--records 2000000] [--size 200] [--partitions 2] [--runs 5]

Starts a broker (EmbeddedBroker, loopback, temp dir) and a local[2] session,
fills a topic of `--partitions` partitions with `--records` values of `--size`
bytes (send_many), then times a Spark job that consumes every column of every
row (`write.format("noop")`) reading:
  * mmlog: the topic, through the mmlog source (one task per partition here);
  * synthetic: a Python data source with the same schema and as many tasks, whose
    read() yields Arrow batches of 20,000 rows built once in memory: what any
    Python source costs Spark, with no fetching and no decoding.
Each is counted once to warm up, then both are run `--runs` times, alternately;
the best run of each counts. Prints rows/s of each and the ratio (the target is
>= 70%).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mmlog.client import Admin, Producer
from mmlog.spark.schema import record_schema
from mmlog.spark.session import local_session, stop_session
from mmlog.testing import EmbeddedBroker

BATCH = 20_000  # rows per synthetic Arrow batch: about what one 4 MiB fetch holds


class SyntheticReader(DataSourceReader):
    """`rows` rows in `tasks` partitions, as the same Arrow batch yielded again and again."""

    def __init__(self, rows: int, tasks: int, size: int) -> None:
        self.rows, self.tasks, self.size = rows, tasks, size

    def partitions(self) -> list[InputPartition]:
        bounds = np.linspace(0, self.rows, self.tasks + 1).astype(int).tolist()
        return [InputPartition(b - a) for a, b in zip(bounds, bounds[1:])]

    def read(self, partition: InputPartition):
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(record_schema(False), timezone="UTC")
        batch = _batch(schema, BATCH, self.size)
        left = partition.value
        while left > 0:
            yield batch if left >= BATCH else batch.slice(0, left)
            left -= BATCH


def _batch(schema: pa.Schema, n: int, size: int) -> pa.RecordBatch:
    values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * size),
                                                    pa.py_buffer(np.zeros(n * size, np.uint8))])
    columns = [pa.nulls(n, pa.binary()), values, pa.repeat(pa.scalar("synthetic"), n),
               pa.array(np.zeros(n, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
               pa.array(np.full(n, 1_700_000_000_000_000, np.int64), pa.timestamp("us", "UTC")),
               pa.array(np.zeros(n, np.int32))]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class SyntheticSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "synthetic"

    def schema(self):
        return record_schema(False)

    def reader(self, schema) -> SyntheticReader:
        return SyntheticReader(int(self.options["rows"]), int(self.options["tasks"]), int(self.options["size"]))


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)
    values = np.zeros((200_000, size), np.uint8)
    with Producer(bootstrap, acks=1, batch_size=256 * 1024, buffer_memory=256 << 20) as producer:
        for start in range(0, records, len(values)):
            n = min(len(values), records - start)
            producer.send_many(topic, values[:n], partition=np.arange(start, start + n) % partitions)
        producer.flush()


def timed(frames: dict, runs: int, expected: int) -> dict[str, float]:
    """Best wall time of `runs` full reads of each DataFrame, after one count each to warm up. The runs
    alternate between the frames, so a busy moment on the machine does not favour either."""
    for df in frames.values():
        assert df.count() == expected
    best = dict.fromkeys(frames, float("inf"))
    for _ in range(runs):
        for name, df in frames.items():
            t = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fetch-bytes", type=int, default=None, help="the source's fetchMaxBytes option")
    args = parser.parse_args()
    with EmbeddedBroker(processors=2) as broker:
        t = time.perf_counter()
        fill(broker.bootstrap, "bench", args.records, args.size, args.partitions)
        print(f"filled: {args.records} records of {args.size} bytes in {time.perf_counter() - t:.1f} s")
        spark = local_session("mmlog-bench")
        try:
            spark.dataSource.register(SyntheticSource)
            reader = spark.read.format("mmlog").option("bootstrap", broker.bootstrap).option("subscribe", "bench")
            if args.fetch_bytes:
                reader = reader.option("fetchMaxBytes", str(args.fetch_bytes))
            mmlog_df = reader.load()
            tasks = mmlog_df.rdd.getNumPartitions()
            synthetic_df = spark.read.format("synthetic").option("rows", args.records).option("tasks", tasks) \
                .option("size", args.size).load()
            best = timed({"synthetic": synthetic_df, "mmlog": mmlog_df}, args.runs, args.records)
            synthetic, mmlog = best["synthetic"], best["mmlog"]
        finally:
            stop_session(spark)
    print(f"tasks: {tasks}  (best of {args.runs})")
    print(f"synthetic: {args.records / synthetic:12,.0f} rows/s  ({synthetic:.2f} s)")
    print(f"mmlog:     {args.records / mmlog:12,.0f} rows/s  ({mmlog:.2f} s)")
    print(f"ratio:     {synthetic / mmlog:12.0%}")


if __name__ == "__main__":
    main()
