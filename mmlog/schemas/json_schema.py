"""JSON Schema documents as the registry holds them: checked against their draft, references resolved.

The draft is the one `$schema` names, draft-07 when it names none (what confluent-kafka's JSONSerializer
sends). A schema's references are the documents its `$ref`s name: each is registered under the name the
schema uses and under that name resolved against the schema's `$id`, so relative and absolute `$ref`s both
find it; a `$ref` that finds nothing makes the schema invalid. The text served is the document as written,
compact, its keys in their order and its decimals as written, as Confluent Schema Registry serves it;
registrations are compared by it, so whitespace does not matter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urljoin

import jsonschema
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing import Registry
from referencing.exceptions import Unresolvable

from mmlog.schemas.errors import InvalidSchema
from mmlog.schemas.json_compatibility import reader_problems
from mmlog.schemas.json_model import enter

DEFAULT_DIALECT = "http://json-schema.org/draft-07/schema#"
# Keywords whose values are data, not schemas: a "$ref" inside them is not a reference.
DATA_KEYWORDS = frozenset(("enum", "const", "examples", "default"))


@dataclass
class JsonSchema:
    """A parsed JSON Schema: the document, its draft and a resolver for its `$ref`s."""

    text: str
    document: object
    specification: object = field(repr=False)
    resolver: object = field(repr=False)
    schema_type: str = "JSON"

    @property
    def identity(self) -> str:
        return self.text

    @property
    def refs_may_have_siblings(self) -> bool:
        """Whether a `$ref` applies beside its sibling keywords (2019-09 on) rather than replacing them."""
        return self.specification.name not in ("draft3", "draft4", "draft6", "draft7")

    def reader_problems(self, writer) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return ["Incompatible because of different schema type"]
        return reader_problems(self, writer)


def parse_json_schema(text: str, references=()) -> JsonSchema:
    """Parse a JSON Schema document whose `$ref`s may name the documents in `references`."""
    document = _loads(text, "schema")
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    dialect = document.get("$schema", DEFAULT_DIALECT) if isinstance(document, dict) else DEFAULT_DIALECT
    validator = jsonschema.validators.validator_for({"$schema": dialect}, default=None)
    if validator is None:
        raise InvalidSchema(f"Invalid schema: unknown $schema {dialect!r}")
    try:
        validator.check_schema(document)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.path)
        raise InvalidSchema(f"Invalid schema: {e.message}" + (f" at '{where}'" if where else "")) from None
    specification = _specification(document, referencing.jsonschema.DRAFT7)
    root = specification.create_resource(document)
    base = root.id() or ""
    registry: Registry = METASCHEMAS  # a schema may refer to its draft's metaschema
    for name, schema_type, ref_text in references:
        if schema_type != "JSON":
            raise InvalidSchema(f"reference {name!r} is a {schema_type} schema; a JSON Schema can only "
                                "refer to JSON Schemas")
        ref_document = _loads(ref_text, f"reference {name!r}")
        resource = _specification(ref_document, specification).create_resource(ref_document)
        uris = {name, urljoin(base, name)} | ({resource.id()} if resource.id() else set())
        registry = registry.with_resources((uri, resource) for uri in uris)
    registry = registry.with_resource(base, root).crawl()  # subschemas with an `$id` of their own
    resolver = registry.resolver(base_uri=base)
    _check_refs(document, resolver, specification)
    return JsonSchema(_compact(json.loads(text, parse_float=Decimal)), document, specification, resolver)


def _loads(text: str, what: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchema(f"Invalid {what}: not JSON: {e}") from None


def _compact(value) -> str:
    """JSON without spaces, keys in their order, decimals as written (1.50 stays 1.50, 1e10 is 1E+10)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(_compact, value)) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _specification(document, default):
    """The draft a document names with `$schema`, `default` when it names none."""
    if isinstance(document, dict) and isinstance(document.get("$schema"), str):
        return referencing.jsonschema.specification_with(document["$schema"], default=default)
    return default


def _check_refs(node, resolver, specification) -> None:
    """Every `$ref` in the document must find a schema, here or among the references."""
    if isinstance(node, list):
        for item in node:
            _check_refs(item, resolver, specification)
        return
    if not isinstance(node, dict):
        return
    resolver = enter(node, resolver, specification)
    if isinstance(node.get("$ref"), str):
        try:
            resolver.lookup(node["$ref"])
        except Unresolvable:
            raise InvalidSchema(f"Invalid schema: $ref {node['$ref']!r} names no schema: neither this one "
                                "nor a reference") from None
    for key, value in node.items():
        if key not in DATA_KEYWORDS and key != "properties":
            _check_refs(value, resolver, specification)
        elif key == "properties" and isinstance(value, dict):
            for sub in value.values():  # property names are not keywords, their schemas are schemas
                _check_refs(sub, resolver, specification)
