"""The sink's typed values: a struct `value` column encoded by a schema of the registry.

With `valueFormat` avro or json on a write, each row's `value` struct is encoded with the schema
`valueSchema` (registered under `valueSubject`, default `<topic>-value`, on first use), or, without one,
with the subject's latest version; for Avro with neither, a record schema is derived from the
struct's type as Spark's `to_avro` derives it (record `topLevelRecord`, nullable fields as unions with
null). With `valueFormat` protobuf, the subject's latest version gives the message (the file's first):
each row's fields fill it by name. Values are framed with the schema's id, so
any registry-aware consumer (confluent-kafka's deserializers, mmlog's, this source) reads them.
Encoding is per value through fastavro / json / protobuf."""

from __future__ import annotations

import json

import pyarrow as pa

from mmlog.client.serde.registry import SchemaRegistry


def avro_schema_of(t: pa.DataType, name: str = "topLevelRecord", nullable: bool = False):
    """An Avro schema for values of an Arrow type (nullable: a union with null first)."""
    if pa.types.is_struct(t):
        out = {"type": "record", "name": name,
               "fields": [{"name": f.name, "type": avro_schema_of(f.type, f"{name}_{f.name}", f.nullable)}
                          for f in t]}
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        out = {"type": "array", "items": avro_schema_of(t.value_type, f"{name}_item", True)}
    elif pa.types.is_map(t):
        out = {"type": "map", "values": avro_schema_of(t.item_type, f"{name}_value", True)}
    elif pa.types.is_timestamp(t):
        out = {"type": "long", "logicalType": "timestamp-micros"}
    elif pa.types.is_date(t):
        out = {"type": "int", "logicalType": "date"}
    else:
        out = _AVRO_PRIMITIVE(t)
    return ["null", out] if nullable else out


def _AVRO_PRIMITIVE(t: pa.DataType) -> str:  # noqa: N802 - a table lookup spelled as one
    for test, name in ((pa.types.is_boolean, "boolean"), (pa.types.is_int8, "int"), (pa.types.is_int16, "int"),
                       (pa.types.is_int32, "int"), (pa.types.is_int64, "long"), (pa.types.is_float32, "float"),
                       (pa.types.is_float64, "double"), (pa.types.is_string, "string"),
                       (pa.types.is_large_string, "string"), (pa.types.is_binary, "bytes")):
        if test(t):
            return name
    raise ValueError(f"mmlog write: a value field of type {t} has no Avro type")


class ValueEncoder:
    """One task's encoder: a serializer per topic, built on first use."""

    def __init__(self, fmt: str, registry: str, subject: str | None, schema: str | None,
                 username: str | None = None, password: str | None = None) -> None:
        self.fmt, self.subject, self.schema_text = fmt, subject, schema
        self.registry = SchemaRegistry(registry, username=username, password=password)
        self._serializers: dict[str, object] = {}

    def encode(self, topic: str, values: pa.Array) -> pa.Array:
        """The binary column of `values` (a struct column) framed for `topic`; nulls stay null."""
        serializer = self._serializers.get(topic) or self._serializers.setdefault(topic, self._make(topic, values.type))
        return pa.array([serializer(topic, v) for v in values.to_pylist()], pa.binary())

    def _make(self, topic: str, t: pa.DataType):
        from mmlog.client.serde.base import topic_name

        subject = self.subject or topic_name(topic, False, None)
        strategy = (lambda _t, _k, _r: subject)
        text = self.schema_text
        latest = text is None
        if latest and self.fmt == "avro" and subject not in self.registry.subjects():
            text, latest = json.dumps(avro_schema_of(t)), False
        if latest:
            found = self.registry.version(subject, "latest")
            text = found.schema.text
        if self.fmt == "avro":
            from mmlog.client.serde.avro import AvroSerializer
            return AvroSerializer(self.registry, text, subject_name_strategy=strategy, use_latest_version=latest)
        if self.fmt == "json":
            from mmlog.client.serde.json_schema import JSONSerializer
            return JSONSerializer(self.registry, text, subject_name_strategy=strategy, use_latest_version=latest)
        from mmlog.client.serde.protobuf import ProtobufSerializer, message_from_dict, writer_class

        if self.schema_text is not None:
            raise ValueError("mmlog write: valueFormat protobuf takes the subject's latest version, not valueSchema")
        cls = writer_class(self.registry, found.id)
        serializer = ProtobufSerializer(self.registry, cls, subject_name_strategy=strategy, use_latest_version=True)
        return lambda topic_, row: None if row is None else serializer(topic_, message_from_dict(cls, row))

    def close(self) -> None:
        self.registry.close()
