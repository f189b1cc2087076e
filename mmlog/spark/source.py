"""The data source Spark instantiates: options in, a batch reader, a stream reader or a writer out.

Spark pickles this object to its Python workers, so it holds nothing but the
options; each method parses and checks them (`options.py`), so a bad option fails
the query on the driver with a one-line ValueError naming it.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from mmlog.spark.options import ReadOptions, WriteOptions, typed_value
from mmlog.spark.reader import BatchReader
from mmlog.spark.schema import check_schema, record_schema
from mmlog.spark.stream import StreamReader
from mmlog.spark.values import spark_type
from mmlog.spark.writer import BatchWriter, StreamWriter


def _value_type(options: ReadOptions):
    return None if options.value_format is None else spark_type(options.value_format)


class MmlogDataSource(DataSource):
    """`format("mmlog")`: Kafka-source-compatible reads (batch and streaming) and writes (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "mmlog"

    def schema(self) -> StructType:
        include_headers, fmt = typed_value(self.options)
        return record_schema(include_headers, None if fmt is None else spark_type(fmt))

    def reader(self, schema: StructType) -> BatchReader:
        options = ReadOptions.parse(self.options, streaming=False)
        check_schema(schema, options.include_headers, _value_type(options))
        return BatchReader(options, schema)

    def streamReader(self, schema: StructType) -> StreamReader:
        options = ReadOptions.parse(self.options, streaming=True)
        check_schema(schema, options.include_headers, _value_type(options))
        return StreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if overwrite:
            raise ValueError("mmlog write: a log can only be appended to: use mode('append')")
        return BatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        if overwrite:
            raise ValueError("mmlog write: a log can only be appended to: use outputMode('append')")
        return StreamWriter(WriteOptions.parse(self.options, streaming=True), schema)
