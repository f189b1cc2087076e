"""Values typed by the schema registry: the value column as a struct of the schema's fields.

With `valueFormat` avro, json or protobuf, the driver asks the registry for the reader schema (the
subject's version, default `<topic>-value` latest, or `valueSchemaId`), turns it into the Spark type
of the `value` column, and every executor decodes each fetched chunk into that column, beside a
`valueSchemaId` column holding the id each record was written with:

- Avro, values written with the reader's own schema, a flat record (mmlog.client.serde.avro_columns):
  one numba pass into columns, strings gathered with one memcpy each, no Python per record;
- Avro otherwise (nested schemas, other writer versions): fastavro per value, resolving each writer's
  schema to the reader's as Avro's rules say, then one pyarrow conversion;
- JSON: the values' JSON text, header cut, parsed by pyarrow's JSON reader against the schema's type
  (C++, no Python per record);
- Protobuf: each value parsed into the writer's message class and converted (per value).

A value that is null stays a null struct; one that is not in the registry's wire format, or does not
decode, fails the task naming its offset.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType, DoubleType, FloatType,
                               IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType)

from mmlog.client.record_arrays import RecordArrays
from mmlog.client.serde import avro_columns, wire
from mmlog.client.serde.registry import Schema, SchemaRegistry

FORMATS = ("binary", "avro", "json", "protobuf")


@dataclass(frozen=True)
class ValueFormat:
    """The reader schema a read decodes values to, and where the registry is (pickled to executors)."""

    format: str
    registry: str
    schema_id: int
    schema: Schema
    username: str | None = None
    password: str | None = None

    def client(self) -> SchemaRegistry:
        return SchemaRegistry(self.registry, username=self.username, password=self.password)


def resolve(format: str, registry: str, topics, subject: str | None, version: str, schema_id: int | None,
            username: str | None = None, password: str | None = None) -> ValueFormat:
    """Ask the registry for the reader schema (driver side)."""
    reg = SchemaRegistry(registry, username=username, password=password)
    with reg:
        if schema_id is None:
            if subject is None:
                if not topics or len(topics) != 1:
                    raise ValueError("mmlog: valueFormat over several topics needs valueSubject or valueSchemaId")
                subject = f"{topics[0]}-value"
            found = reg.version(subject, version)
            schema_id, schema = found.id, found.schema
        else:
            schema = reg.schema(schema_id)
    expected = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}[format]
    if schema.schema_type != expected:
        raise ValueError(f"mmlog: valueFormat {format}, but schema {schema_id} is {schema.schema_type}")
    if format == "protobuf":  # the executors build message classes from the serialized file
        with reg:
            schema = Schema(reg.schema(schema_id, fmt="serialized").text, "PROTOBUF", schema.references)
    return ValueFormat(format, registry, schema_id, schema, username, password)


# -- the Spark type of the value column ----------------------------------------------------------------

def spark_type(fmt: ValueFormat) -> DataType:
    if fmt.format == "avro":
        from mmlog.client.serde.avro import parsed
        with fmt.client() as reg:
            return _avro_type(parsed(reg, fmt.schema))
    if fmt.format == "json":
        return _json_type(json.loads(fmt.schema.text))
    return _protobuf_type(_protobuf_class(fmt).DESCRIPTOR)


_AVRO = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
         "double": DoubleType(), "string": StringType(), "bytes": BinaryType()}


def _avro_type(t) -> DataType:
    if isinstance(t, str):
        if t in _AVRO:
            return _AVRO[t]
        raise ValueError(f"mmlog: Avro type {t!r} has no Spark column")
    if isinstance(t, list):
        rest = [b for b in t if b != "null"]
        if len(rest) == 1:
            return _avro_type(rest[0])
        return StructType([StructField(f"member{i}", _avro_type(b)) for i, b in enumerate(rest)])
    kind, logical = t["type"], t.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if logical == "date":
        return DateType()
    if kind == "record":
        return StructType([StructField(f["name"], _avro_type(f["type"])) for f in t["fields"]])
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(_avro_type(t["items"]))
    if kind == "map":
        return MapType(StringType(), _avro_type(t["values"]))
    return _avro_type(kind)


_JSON = {"string": StringType(), "integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}


def _json_type(doc: dict) -> DataType:
    kind = doc.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind == "object" or (kind is None and "properties" in doc):
        return StructType([StructField(name, _json_type(sub)) for name, sub in doc.get("properties", {}).items()])
    if kind == "array":
        return ArrayType(_json_type(doc.get("items", {})))
    if kind in _JSON:
        return _JSON[kind]
    return StringType()  # anything looser is kept as its JSON text


def _protobuf_type(descriptor) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    scalar = {F.TYPE_BOOL: BooleanType(), F.TYPE_INT32: IntegerType(), F.TYPE_SINT32: IntegerType(),
              F.TYPE_SFIXED32: IntegerType(), F.TYPE_UINT32: LongType(), F.TYPE_FIXED32: LongType(),
              F.TYPE_INT64: LongType(), F.TYPE_SINT64: LongType(), F.TYPE_SFIXED64: LongType(),
              F.TYPE_UINT64: LongType(), F.TYPE_FIXED64: LongType(), F.TYPE_FLOAT: FloatType(),
              F.TYPE_DOUBLE: DoubleType(), F.TYPE_STRING: StringType(), F.TYPE_BYTES: BinaryType(),
              F.TYPE_ENUM: StringType()}
    fields = []
    for f in descriptor.fields:
        t = _protobuf_type(f.message_type) if f.type == F.TYPE_MESSAGE else scalar[f.type]
        fields.append(StructField(f.name, ArrayType(t) if f.is_repeated else t))
    return StructType(fields)


def _protobuf_class(fmt: ValueFormat):
    from mmlog.client.serde.protobuf import ProtobufDeserializer

    with fmt.client() as reg:
        decoder = ProtobufDeserializer(reg)
        pool, proto = decoder._load(fmt.schema_id)
    from google.protobuf import message_factory
    name = f"{proto.package}.{proto.message_type[0].name}" if proto.package else proto.message_type[0].name
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


# -- executors: a chunk's value column -----------------------------------------------------------------

class ValueDecoder:
    """One executor's decoder of value columns for one read (writer schemas fetched once per id)."""

    def __init__(self, fmt: ValueFormat, arrow_type: pa.DataType) -> None:
        self.fmt = fmt
        self.type = arrow_type
        self._registry = None
        self._fallback = None
        if fmt.format == "avro":
            from mmlog.client.serde.avro import parsed
            with fmt.client() as reg:
                self.reader = parsed(reg, fmt.schema)
            self.plan = avro_columns.plan(self.reader)

    def columns(self, arrays: RecordArrays, buf: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """(the value column, the valueSchemaId column) of one chunk."""
        ids = wire.schema_ids(arrays.buffer, arrays.value_starts, arrays.value_lengths)
        bad = np.flatnonzero(ids == wire.BAD_ID)
        if len(bad):
            raise wire.SerializationError(f"mmlog: {arrays.topic}-{arrays.partition} offset "
                                          f"{int(arrays.offsets[bad[0]])}: value not in the registry's wire format")
        id_column = pa.array(ids.astype(np.int32), pa.int32(), mask=ids < 0)
        valid = ids >= 0
        if self.fmt.format == "avro":
            return self._avro(arrays, buf, ids, valid), id_column
        if self.fmt.format == "json":
            return self._json(arrays, buf, valid), id_column
        return self._python(arrays, buf, ids, self._protobuf_decoder()), id_column

    def _avro(self, arrays, buf, ids, valid) -> pa.Array:
        if self.plan is not None and bool(np.all(ids[valid] == self.fmt.schema_id)):
            starts = arrays.value_starts[valid] + wire.HEADER
            lengths = arrays.value_lengths[valid] - wire.HEADER
            cols, bad = avro_columns.decode(buf, starts, lengths, self.plan)
            if bad < 0:
                return _spread(_avro_struct(buf, cols, self.plan, self.type), valid)
            raise wire.SerializationError(f"mmlog: {arrays.topic}-{arrays.partition} offset "
                                          f"{int(arrays.offsets[np.flatnonzero(valid)[bad]])}: value does not "
                                          f"decode with schema {self.fmt.schema_id}")
        return self._python(arrays, buf, ids, self._avro_decoder())

    def _avro_decoder(self):
        if self._fallback is None:
            from mmlog.client.serde.avro import AvroDeserializer
            self._fallback = AvroDeserializer(self._client(), reader_schema=self.reader)
        return self._fallback

    def _protobuf_decoder(self):
        if self._fallback is None:
            from mmlog.client.serde.protobuf import ProtobufDeserializer
            self._fallback = ProtobufDeserializer(self._client(), as_dict=True)
        return self._fallback

    def _client(self) -> SchemaRegistry:
        if self._registry is None:
            self._registry = self.fmt.client()
        return self._registry

    def _python(self, arrays, buf, ids, deserializer) -> pa.Array:
        values = deserializer.decode_arrays(arrays)
        return pa.array(values, type=self.type)

    def _json(self, arrays, buf, valid) -> pa.Array:
        n = int(valid.sum())
        if n == 0:
            return pa.nulls(len(valid), self.type)
        from mmlog.spark.arrow import gather
        starts = arrays.value_starts[valid] + wire.HEADER
        lengths = arrays.value_lengths[valid] - wire.HEADER
        # One newline-delimited document: each value's text, then "\n" (JSON text never holds a raw newline
        # outside strings, where it is escaped; a pretty-printed value is joined onto one line by the reader).
        offsets, data = gather(buf, starts, lengths)
        joined = np.empty(len(data) + n, np.uint8)
        at = offsets[1:].astype(np.int64) + np.arange(n)
        keep = np.ones(len(joined), bool)
        keep[at] = False
        joined[keep] = data
        joined[at] = ord("\n")
        schema = pa.schema(list(self.type)) if pa.types.is_struct(self.type) else None
        table = pa_json.read_json(io.BytesIO(joined.tobytes()),
                                  parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                                                     unexpected_field_behavior="ignore",
                                                                     newlines_in_values=True))
        struct = pa.StructArray.from_arrays([table.column(f.name).combine_chunks().cast(f.type) for f in self.type],
                                            fields=list(self.type))
        return _spread(struct, valid)


def _avro_struct(buf: np.ndarray, cols: avro_columns.Columns, plan: avro_columns.Plan, type: pa.StructType):
    from mmlog.spark.arrow import binary_array

    arrays = []
    for f, field in enumerate(type):
        kind, valid = int(plan.kinds[f]), cols.valid[:, f]
        mask = None if valid.all() else ~valid
        if kind in (avro_columns.STRING, avro_columns.BYTES):
            lengths = np.where(valid, cols.lengths[:, f], -1)
            arrays.append(binary_array(buf, cols.starts[:, f], lengths, field.type))
        elif kind in (avro_columns.FLOAT, avro_columns.DOUBLE):
            values = avro_columns.floats(buf, np.where(valid, cols.starts[:, f], 0), kind)
            arrays.append(pa.array(values, field.type, mask=mask))
        elif kind == avro_columns.ENUM:
            symbols = pa.array(plan.symbols[f], pa.string())
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(cols.ints[:, f].astype(np.int32), mask=mask),
                                                         symbols).cast(field.type))
        else:
            arrays.append(_integers(cols.ints[:, f], plan.types[f], field.type, mask))
    return pa.StructArray.from_arrays(arrays, fields=list(type))


def _integers(values: np.ndarray, avro_type, arrow_type: pa.DataType, mask) -> pa.Array:
    logical = avro_type.get("logicalType") if isinstance(avro_type, dict) else None
    if logical == "timestamp-millis":
        values = values * 1000
    if pa.types.is_date(arrow_type):
        return pa.array(values.astype(np.int32), pa.int32(), mask=mask).cast(arrow_type)
    if pa.types.is_boolean(arrow_type):
        return pa.array(values.astype(bool), arrow_type, mask=mask)
    return pa.array(values, pa.int64(), mask=mask).cast(arrow_type)


def _spread(struct: pa.StructArray, valid: np.ndarray) -> pa.Array:
    """The struct of the non-null values placed at their rows, null rows between (no copy when none is null)."""
    if valid.all():
        return struct
    index = np.full(len(valid), -1, np.int64)
    index[valid] = np.arange(int(valid.sum()))
    return struct.take(pa.array(index, mask=~valid))
