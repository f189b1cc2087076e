"""How the Messages page shows a record's bytes: as text (UTF-8, bad bytes replaced), JSON (indented, or
the text when it is not JSON), hex, or decoded by the schema registry by the schema id in Confluent's
framing (Avro, JSON Schema, Protobuf; mmlog.client.serde's deserializers, asked as the session's user).
Always a string: the page puts it in as text."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid

from mmlog.client.serde import wire

FORMATS = ("text", "json", "hex", "registry")
MAX_SHOWN = 64 * 1024  # bytes of one key or value shown; the rest is cut (`truncated`)


def show(data: bytes | None, fmt: str, registry=None) -> dict:
    """{"shown": str or None (null), "size", "truncated", and "schema_id" or "error" when decoding}."""
    if data is None:
        return {"shown": None, "size": 0, "truncated": False}
    raw = bytes(data)
    out = {"size": len(raw), "truncated": len(raw) > MAX_SHOWN}
    cut = raw[:MAX_SHOWN]
    if fmt == "hex":
        out["shown"] = cut.hex(" ")
    elif fmt == "json":
        out["shown"] = _json(cut)
    elif fmt == "registry":
        out.update(_decoded(raw, registry))
        out["truncated"] = False
    else:
        out["shown"] = cut.decode("utf-8", "replace")
    return out


def _json(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _decoded(raw: bytes, registry) -> dict:
    try:
        schema_id, _ = wire.split(raw)
    except wire.SerializationError:
        return {"shown": raw[:MAX_SHOWN].decode("utf-8", "replace"), "error": "not in the registry's framing"}
    if registry is None:
        return {"shown": raw[:MAX_SHOWN].hex(" "), "schema_id": schema_id, "error": "no schema registry"}
    try:
        value = registry.decode(schema_id, raw)
    except Exception as exc:  # noqa: BLE001 - any failure to decode shows the bytes and why
        return {"shown": raw[:MAX_SHOWN].hex(" "), "schema_id": schema_id, "error": f"{type(exc).__name__}: {exc}"}
    return {"shown": json.dumps(value, indent=2, ensure_ascii=False, default=_plain), "schema_id": schema_id}


def _plain(value):
    """What Avro and Protobuf decode to beyond JSON's types, as JSON shows it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return repr(value)


class RegistryDecoder:
    """A session's decoders by schema id: the schema's type picks Avro, JSON Schema or Protobuf."""

    def __init__(self, registry) -> None:
        self.registry = registry  # mmlog.client.serde.SchemaRegistry, with the session's credentials
        self._by_type: dict = {}

    def decode(self, schema_id: int, raw: bytes):
        kind = self.registry.schema(schema_id).schema_type
        deserializer = self._by_type.get(kind)
        if deserializer is None:
            deserializer = self._by_type[kind] = _deserializer(kind, self.registry)
        return deserializer(raw)

    def close(self) -> None:
        self.registry.close()


def _deserializer(kind: str, registry):
    from mmlog.client import serde

    if kind == "AVRO":
        return serde.AvroDeserializer(registry)
    if kind == "JSON":
        return serde.JSONDeserializer(registry)
    if kind == "PROTOBUF":
        return serde.ProtobufDeserializer(registry, as_dict=True)
    raise ValueError(f"schema type {kind}")
