"""The rows the source reads: the columns of Spark's own Kafka source, so that jobs move between the two.

    key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int[, headers array<struct<key string, value binary>>]

`headers` is there only with the option includeHeaders=true, as in Spark. With valueFormat
(mmlog/spark/values.py) `value` is a struct of the schema's fields and `valueSchemaId int` follows
the columns. Built from
type objects (not DDL) because parsing DDL needs a running session, and the
executors build their Arrow schema from the same objects.
"""

from __future__ import annotations

from pyspark.sql.types import (ArrayType, BinaryType, DataType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

HEADERS = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                        StructField("value", BinaryType())])))
RECORD = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])


def record_schema(include_headers: bool, value_type: DataType | None = None) -> StructType:
    """The source's schema, with or without the headers column, with a typed value when one is given."""
    fields = list(RECORD.fields)
    if value_type is not None:
        fields[1] = StructField("value", value_type)
    fields += [HEADERS] if include_headers else []
    fields += [StructField("valueSchemaId", IntegerType())] if value_type is not None else []
    return StructType(fields)


def arrow_record_schema(include_headers: bool, value_type: DataType | None = None):
    """`record_schema` as the Arrow schema the executors' batches carry (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(record_schema(include_headers, value_type), timezone="UTC")


def check_schema(given: StructType, include_headers: bool, value_type: DataType | None = None) -> None:
    """A schema set with `.schema(...)` must be the source's own (the columns are fixed)."""
    expected = record_schema(include_headers, value_type)
    if given is not None and given != expected:
        raise ValueError(f"mmlog: the schema is fixed ({expected.simpleString()}); got {given.simpleString()}"
                         + ("" if include_headers else " (set includeHeaders=true for the headers column)"))
