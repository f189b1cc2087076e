"""Schemas as the schema registry holds them: AVRO, JSON and PROTOBUF, parsed, normalised and compared.

Sans-IO, like the protocol codec: the registry (mmlog/registry/) stores and serves, this package decides.
One entry point per question the registry asks:

- `parse(schema_type, text, references)` -> a `ParsedSchema`, or `InvalidSchema` (HTTP 422, 42201) with
  the reason. `references` are the schemas this one names, already resolved by the registry, transitive
  ones included, dependencies first: `[(name, schema_type, text), ...]`, where the name is what the
  schema uses to refer (an Avro full name, a JSON Schema `$ref` URL, a `.proto` import path).
- `ParsedSchema.text`: what the registry stores and serves for the schema; `ParsedSchema.identity`: the
  form two registrations are compared by (the same identity under a subject is the same version; under
  another subject it keeps its global id).
- `compatibility.check(level, new, existing)`: the reasons `new` may not follow `existing` (oldest
  first) under a compatibility level; empty when it may.
"""

from __future__ import annotations

from typing import Protocol

# raised by every type's module, so defined in one of its own: importing this package back would be a cycle
from mmlog.schemas.errors import InvalidSchema

TYPES = ("AVRO", "JSON", "PROTOBUF")  # the order /schemas/types answers with is the registry's concern


class ParsedSchema(Protocol):
    schema_type: str
    text: str
    identity: str

    def reader_problems(self, writer: "ParsedSchema") -> list[str]:
        """Why this schema, as a reader, cannot read data written with `writer` (empty: it can)."""


def parse(schema_type: str, text: str, references: list[tuple[str, str, str]] = ()) -> ParsedSchema:
    if schema_type == "AVRO":
        from mmlog.schemas.avro import parse_avro
        return parse_avro(text, references)
    if schema_type == "JSON":
        from mmlog.schemas.json_schema import parse_json_schema
        return parse_json_schema(text, references)
    if schema_type == "PROTOBUF":
        from mmlog.schemas.protobuf import parse_protobuf
        return parse_protobuf(text, references)
    raise InvalidSchema(f"unknown schema type {schema_type!r}: one of {', '.join(TYPES)}")
