"""A Spark data source named "mmlog", with the options and columns of Spark's own Kafka source.

    from mmlog.spark import register
    register(spark)
    df = (spark.read.format("mmlog").option("bootstrap", "127.0.0.1:9092")
          .option("subscribe", "clicks").load())

Modules, each named after what it holds: `source` (the DataSource), `options`
(parsing and checking), `offsets` (offset specs, ranges, rate limits), `lookup`
(the driver's metadata and offset look-ups), `reader` (batch reads), `stream`
(streaming reads), `fetch` (an executor fetching one range from its leader),
`direct` (a fetched chunk decoded straight into Arrow buffers), `arrow` (Arrow
batches from the bulk decoder's columns), `writer` (batch writes),
`schema` (the columns).
"""

from __future__ import annotations


def register(spark) -> None:
    """Make `format("mmlog")` known to a SparkSession (reads, streaming reads and writes)."""
    from mmlog.spark.source import MmlogDataSource

    spark.dataSource.register(MmlogDataSource)


__all__ = ["register"]
