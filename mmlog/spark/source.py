"""The data source Spark instantiates: options in, a batch reader, a stream reader or a writer out.

Spark pickles this object to its Python workers, so it holds nothing but the
options; each method parses and checks them (`options.py`), so a bad option fails
the query on the driver with a one-line ValueError naming it.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from mmlog.spark.options import ReadOptions, WriteOptions
from mmlog.spark.reader import BatchReader
from mmlog.spark.schema import check_schema, record_schema
from mmlog.spark.stream import StreamReader
from mmlog.spark.writer import BatchWriter, StreamWriter


class MmlogDataSource(DataSource):
    """`format("mmlog")`: Kafka-source-compatible reads (batch and streaming) and writes (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "mmlog"

    def schema(self) -> StructType:
        return record_schema(self._include_headers())

    def _include_headers(self) -> bool:
        return {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "").strip().lower() == "true"

    def reader(self, schema: StructType) -> BatchReader:
        options = ReadOptions.parse(self.options, streaming=False)
        check_schema(schema, options.include_headers)
        return BatchReader(options, schema)

    def streamReader(self, schema: StructType) -> StreamReader:
        options = ReadOptions.parse(self.options, streaming=True)
        check_schema(schema, options.include_headers)
        return StreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if overwrite:
            raise ValueError("mmlog write: a log can only be appended to: use mode('append')")
        return BatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        if overwrite:
            raise ValueError("mmlog write: a log can only be appended to: use outputMode('append')")
        return StreamWriter(WriteOptions.parse(self.options, streaming=True), schema)
