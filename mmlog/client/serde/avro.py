"""Avro values in the registry's wire format, encoded and decoded with fastavro.

    serialize = AvroSerializer(registry, '{"type": "record", "name": "Payment", "fields": [...]}')
    producer.send("payments", value=serialize("payments", {"id": 1, "amount": 9.5}))
    deserialize = AvroDeserializer(registry)
    payment = deserialize(record.value)

A deserializer given a reader schema resolves every writer's schema to it (Avro's schema resolution),
so a consumer reads old and new versions of a subject as one shape."""

from __future__ import annotations

import io
import json

import fastavro

from mmlog.client.serde import wire
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

    def make_decoder(self, schema_id: int, schema: Schema):
        if schema.schema_type != "AVRO":
            raise wire.SerializationError(f"schema {schema_id} is {schema.schema_type}, not AVRO")
        writer, reader = parsed(self.registry, schema), self.reader

        def decode(payload: memoryview):
            return fastavro.schemaless_reader(io.BytesIO(payload), writer, reader)

        return decode
