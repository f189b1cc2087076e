"""Values typed by a schema registry: Avro, JSON Schema and Protobuf in Confluent's wire format.

`SchemaRegistry` speaks the registry's REST API (mmlog's brokers serve it; Confluent's works too);
each serializer turns an object into a value for `Producer.send`, each deserializer turns a
`ConsumerRecord.value` (or a whole fetched chunk, `decode_arrays`) back. The names load on first use,
so an Avro user needs no protobuf import."""

from __future__ import annotations

import importlib

_WHERE = {
    "SchemaRegistry": "registry", "Schema": "registry", "Reference": "registry", "RegistryError": "registry",
    "SerializationError": "wire",
    "AvroSerializer": "avro", "AvroDeserializer": "avro",
    "JSONSerializer": "json_schema", "JSONDeserializer": "json_schema",
    "ProtobufSerializer": "protobuf", "ProtobufDeserializer": "protobuf",
    "topic_name": "base", "record_name": "base", "topic_record_name": "base",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
