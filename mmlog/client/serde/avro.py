"""Avro values in the registry's wire format, encoded and decoded with fastavro.

    serialize = AvroSerializer(registry, '{"type": "record", "name": "Payment", "fields": [...]}')
    producer.send("payments", value=serialize("payments", {"id": 1, "amount": 9.5}))
    deserialize = AvroDeserializer(registry)
    payment = deserialize(record.value)

A deserializer given a reader schema resolves every writer's schema to it (Avro's schema resolution),
so a consumer reads old and new versions of a subject as one shape. `columns(chunk)` answers a fetched
chunk's values as numpy columns: when every value was written with one flat record schema (and no other
reader schema is asked for) one numba pass decodes them (avro_columns.py), else each value is decoded
and the columns built from the records; both give the same columns."""

from __future__ import annotations

import io
import json

import fastavro
import numpy as np

from mmlog.client.serde import avro_columns, wire
from mmlog.client.serde.base import Deserializer, Serializer
from mmlog.client.serde.registry import Reference, Schema, SchemaRegistry


def _loads(schema: str | dict) -> dict | list | str:
    return json.loads(schema) if isinstance(schema, str) else schema


def parsed(registry: SchemaRegistry, schema: Schema) -> dict:
    """fastavro's parsed form of a registry schema, its references' named types parsed first."""
    named: dict = {}
    _parse_references(registry, schema.references, named, set())
    return fastavro.parse_schema(_loads(schema.text), named_schemas=named)


def _parse_references(registry: SchemaRegistry, references, named: dict, seen: set) -> None:
    for ref in references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        found = registry.version(ref.subject, ref.version).schema
        _parse_references(registry, found.references, named, seen)
        fastavro.parse_schema(_loads(found.text), named_schemas=named)


class AvroSerializer(Serializer):
    """Objects (dicts for records) to framed Avro; the schema is registered under the subject on first use."""

    def __init__(self, registry: SchemaRegistry, schema: str | dict, *, references: tuple[Reference, ...] = (),
                 **options) -> None:
        super().__init__(registry, **options)
        doc = _loads(schema)
        self.schema = Schema(json.dumps(doc, separators=(",", ":")), "AVRO", tuple(references))
        self.parsed = parsed(registry, self.schema)
        self.record = self.parsed.get("name") if isinstance(self.parsed, dict) else None

    def __call__(self, topic: str, obj) -> bytes | None:
        if obj is None:
            return None
        header = self._headers.get(topic) or self.header(topic)
        out = io.BytesIO()  # the header, then the value written after it: one buffer, no concatenation
        out.write(header)
        self._write(out, obj)
        return out.getvalue()

    def encode(self, obj) -> bytes:
        out = io.BytesIO()
        self._write(out, obj)
        return out.getvalue()

    def _write(self, out: io.BytesIO, obj) -> None:
        try:
            fastavro.schemaless_writer(out, self.parsed, obj)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise wire.SerializationError(f"value does not match the Avro schema: {exc}") from exc


class AvroDeserializer(Deserializer):
    """Framed Avro to objects, with the writer's schema from the registry (and an optional reader schema)."""

    def __init__(self, registry: SchemaRegistry, reader_schema: str | dict | None = None) -> None:
        super().__init__(registry)
        self.reader = None if reader_schema is None else fastavro.parse_schema(_loads(reader_schema))

    def columns(self, arrays) -> dict[str, np.ndarray]:
        """A chunk's values (all records of one schema; a null value is a null row) as one numpy array per
        field: integers, floats and booleans typed, strings, bytes and enum symbols as objects, and a
        field that a union makes nullable as a masked array."""
        ids = wire.schema_ids(arrays.buffer, arrays.value_starts, arrays.value_lengths)
        if (ids == wire.BAD_ID).any():
            raise wire.SerializationError(f"{arrays.topic}-{arrays.partition}: a value is not in the wire format")
        present = np.unique(ids[ids >= 0])
        if len(present) == 1 and self.reader is None:
            writer = parsed(self.registry, self.registry.schema(int(present[0])))
            plan = avro_columns.plan(writer, logical=False)
            if plan is not None:
                return self._kernel_columns(arrays, ids >= 0, plan)
        return records_to_columns(self.decode_arrays(arrays), self.reader or (
            parsed(self.registry, self.registry.schema(int(present[-1]))) if len(present) else None))

    def _kernel_columns(self, arrays, valid_rows: np.ndarray, plan: avro_columns.Plan) -> dict[str, np.ndarray]:
        buf = np.frombuffer(arrays.buffer, np.uint8)
        starts = arrays.value_starts[valid_rows] + wire.HEADER
        cols, bad = avro_columns.decode(buf, starts, arrays.value_lengths[valid_rows] - wire.HEADER, plan)
        if bad >= 0:
            offset = int(arrays.offsets[np.flatnonzero(valid_rows)[bad]])
            raise wire.SerializationError(f"{arrays.topic}-{arrays.partition} offset {offset}: not a value of its "
                                          "schema")
        out = {}
        for f, name in enumerate(plan.names):
            kind, valid = int(plan.kinds[f]), np.zeros(len(valid_rows), bool)
            valid[valid_rows] = cols.valid[:, f]
            values = np.zeros(len(valid_rows), _DTYPES[kind]) if kind in _DTYPES else np.empty(len(valid_rows), object)
            if kind in (avro_columns.FLOAT, avro_columns.DOUBLE):
                values[valid_rows] = avro_columns.floats(buf, np.where(cols.valid[:, f], cols.starts[:, f], 0), kind)
            elif kind in _DTYPES:
                values[valid_rows] = cols.ints[:, f]
            else:
                values[valid_rows] = np.array(avro_columns.field_values(buf, cols, plan, f) + [None],
                                              dtype=object)[:-1]
            out[name] = values if valid.all() else np.ma.masked_array(values, ~valid)
        return out

    def make_decoder(self, schema_id: int, schema: Schema):
        if schema.schema_type != "AVRO":
            raise wire.SerializationError(f"schema {schema_id} is {schema.schema_type}, not AVRO")
        writer, reader = parsed(self.registry, schema), self.reader

        def decode(payload: memoryview):
            return fastavro.schemaless_reader(io.BytesIO(payload), writer, reader)

        return decode


_DTYPES = {avro_columns.BOOLEAN: np.bool_, avro_columns.INT: np.int32, avro_columns.LONG: np.int64,
           avro_columns.FLOAT: np.float32, avro_columns.DOUBLE: np.float64}


def records_to_columns(records: list, schema) -> dict[str, np.ndarray]:
    """The reference for `columns`: decoded records (None: a null row) turned into the same arrays."""
    plan = avro_columns.plan(schema, logical=False) if schema is not None else None
    names = [f["name"] for f in schema["fields"]] if isinstance(schema, dict) and "fields" in schema else []
    out = {}
    for f, name in enumerate(names):
        items = [None if r is None else r[name] for r in records]
        dtype = _DTYPES.get(int(plan.kinds[f]), object) if plan is not None else object
        valid = np.array([v is not None for v in items], bool)
        values = np.zeros(len(items), dtype) if dtype is not object else np.empty(len(items), object)
        if dtype is object:
            values[:] = np.array(items + [None], dtype=object)[:-1]
        else:
            values[valid] = [v for v in items if v is not None]
        out[name] = values if valid.all() else np.ma.masked_array(values, ~valid)
    return out
