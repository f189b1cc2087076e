"""JSON values under a JSON Schema, in the registry's wire format: validated, then compact JSON text."""

from __future__ import annotations

import json

import jsonschema

from mmlog.client.serde import wire
from mmlog.client.serde.base import Deserializer, Serializer
from mmlog.client.serde.registry import Reference, Schema, SchemaRegistry


def _validator(doc: dict):
    cls = jsonschema.validators.validator_for(doc)
    cls.check_schema(doc)
    return cls(doc)


class JSONSerializer(Serializer):
    """Objects to framed JSON, each checked against the schema first (`validate=False` skips the check)."""

    def __init__(self, registry: SchemaRegistry, schema: str | dict, *, references: tuple[Reference, ...] = (),
                 validate: bool = True, **options) -> None:
        super().__init__(registry, **options)
        doc = json.loads(schema) if isinstance(schema, str) else schema
        self.schema = Schema(json.dumps(doc, separators=(",", ":")), "JSON", tuple(references))
        self.record = doc.get("title") if isinstance(doc, dict) else None
        self.validator = _validator(doc) if validate else None

    def encode(self, obj) -> bytes:
        if self.validator is not None:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(obj))
            if error is not None:
                raise wire.SerializationError(f"value does not match the JSON schema: {error.message}")
        return json.dumps(obj, separators=(",", ":")).encode()


class JSONDeserializer(Deserializer):
    """Framed JSON to objects; `validate=True` checks each against its writer's schema."""

    def __init__(self, registry: SchemaRegistry, *, validate: bool = False) -> None:
        super().__init__(registry)
        self.validate = validate

    def make_decoder(self, schema_id: int, schema: Schema):
        if schema.schema_type != "JSON":
            raise wire.SerializationError(f"schema {schema_id} is {schema.schema_type}, not JSON")
        validator = _validator(json.loads(schema.text)) if self.validate else None

        def decode(payload: memoryview):
            obj = json.loads(bytes(payload))
            if validator is not None:
                error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
                if error is not None:
                    raise wire.SerializationError(f"value does not match schema {schema_id}: {error.message}")
            return obj

        return decode
