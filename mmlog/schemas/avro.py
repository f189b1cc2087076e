"""Avro schemas as the registry holds them: parsed and checked, with the text stored and served.

The text is the schema re-serialised compactly in Avro's own attribute order, as Confluent Schema Registry
stores it: reserved attributes in a fixed order (type, name, namespace, doc, then fields/symbols/size/items/
values), other attributes after them in the order written, namespaces written only where they differ from
the enclosing one, and named types defined elsewhere (references, or earlier in the schema) written by
name. Two registrations are the same version when their texts are equal, so whitespace and the order of
reserved attributes do not matter. Checks that fastavro leaves out (strict names, duplicate fields, union
rules, fixed sizes) are made while the text is built; defaults and unknown types are fastavro's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from fastavro.schema import parse_schema

from mmlog.schemas.avro_compatibility import PRIMITIVES, reader_problems
from mmlog.schemas.errors import InvalidSchema

# Attributes Avro reads itself; every other attribute is a property, kept and served in the order written.
SCHEMA_RESERVED = frozenset(("doc", "fields", "items", "name", "namespace", "size", "symbols", "values",
                             "type", "aliases"))
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
ORDERS = ("ascending", "descending", "ignore")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass
class AvroSchema:
    """A parsed Avro schema: `parsed` is fastavro's form (full names), `named` every named type it can see."""

    text: str
    parsed: object
    named: dict = field(repr=False)
    schema_type: str = "AVRO"

    @property
    def identity(self) -> str:
        return self.text

    def reader_problems(self, writer) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return ["Incompatible because of different schema type"]
        return reader_problems(self, writer)


def parse_avro(text: str, references=()) -> AvroSchema:
    """Parse an Avro schema whose named types may come from `references` (dependencies first)."""
    named: dict = {}
    for name, schema_type, ref_text in references:
        if schema_type != "AVRO":
            raise InvalidSchema(f"reference {name!r} is a {schema_type} schema; an Avro schema can only "
                                "refer to Avro schemas")
        _fastavro(_loads(ref_text, f"reference {name!r}"), named)
    schema = _loads(text, "schema")
    canonical = _Canonical(set(named)).schema(schema, None)
    own = dict(named)
    parsed = _fastavro(schema, own)
    return AvroSchema(json.dumps(canonical, separators=(",", ":"), ensure_ascii=False), parsed, own)


def _loads(text: str, what: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchema(f"Invalid {what}: not JSON: {e}") from None


def _fastavro(schema, named: dict):
    try:
        return parse_schema(schema, named_schemas=named)
    except InvalidSchema:
        raise
    except Exception as e:  # fastavro raises several types (UnknownType, SchemaParseException, ...)
        raise InvalidSchema(f"Invalid schema: {e}") from None


def _check_name(name, what: str) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidSchema(f"Invalid schema: illegal {what} {name!r}: a name starts with a letter or "
                            "_ and holds only letters, digits and _")


def _full_name(node: dict, space: str | None) -> tuple[str, str | None]:
    """(short name, namespace) of a named type's definition, the namespace inherited when not given."""
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSchema(f"Invalid schema: no name in {json.dumps(node)[:200]}")
    if "." in name:
        space, name = name.rsplit(".", 1)
    elif "namespace" in node:
        space = node["namespace"]
        if space is not None and not isinstance(space, str):
            raise InvalidSchema(f"Invalid schema: namespace {space!r} is not a string")
    _check_name(name, "name")
    for part in (space.split(".") if space else ()):
        _check_name(part, "namespace part")
    return name, space or None


def _join(space: str | None, name: str) -> str:
    return f"{space}.{name}" if space else name


def _relative(full: str, space: str | None) -> str:
    """A full name as written inside `space`: short when it is in that namespace."""
    own_space, _, short = full.rpartition(".")
    return short if (own_space or None) == space and short not in PRIMITIVES else full


def _props(node: dict, reserved) -> dict:
    return {k: v for k, v in node.items() if k not in reserved}


class _Canonical:
    """Builds the served form of a schema while checking what fastavro does not."""

    def __init__(self, known: set[str]):
        self.known = known  # full names defined so far, the references' included

    def schema(self, node, space: str | None):
        if isinstance(node, str):
            return self.reference(node, space)
        if isinstance(node, list):
            return self.union(node, space)
        if not isinstance(node, dict):
            raise InvalidSchema(f"Invalid schema: {json.dumps(node)} is not a schema")
        kind = node.get("type")
        if not isinstance(kind, str):
            raise InvalidSchema(f"Invalid schema: no type in {json.dumps(node)[:200]}")
        if kind in PRIMITIVES:
            props = _props(node, SCHEMA_RESERVED)
            return {"type": kind, **props} if props else kind
        if kind in ("record", "error"):
            return self.record(node, kind, space)
        if kind == "enum":
            return self.enum(node, space)
        if kind == "fixed":
            return self.fixed(node, space)
        if kind == "array":
            return {"type": "array", "items": self.schema(self.required(node, "items"), space),
                    **_props(node, SCHEMA_RESERVED)}
        if kind == "map":
            return {"type": "map", "values": self.schema(self.required(node, "values"), space),
                    **_props(node, SCHEMA_RESERVED)}
        return self.reference(kind, space)  # {"type": "com.example.Named"} names a type defined before

    @staticmethod
    def required(node: dict, key: str):
        if key not in node:
            raise InvalidSchema(f"Invalid schema: {node.get('type')} has no {key!r}: "
                                f"{json.dumps(node)[:200]}")
        return node[key]

    def reference(self, name: str, space: str | None) -> str:
        if name in PRIMITIVES:
            return name
        full = name if "." in name else _join(space, name)
        if full not in self.known:
            full = name  # as Avro does, a short name not found in the namespace is tried in the null one
        if full not in self.known:
            raise InvalidSchema(f"Invalid schema: unknown type {name!r}")
        return _relative(full, space)

    def union(self, branches: list, space: str | None) -> list:
        out, seen = [], set()
        for branch in branches:
            if isinstance(branch, list):
                raise InvalidSchema("Invalid schema: a union may not hold another union directly")
            served = self.schema(branch, space)
            key = self.branch_key(served, space)
            if key in seen:
                raise InvalidSchema(f"Invalid schema: duplicate {key!r} in union")
            seen.add(key)
            out.append(served)
        return out

    def branch_key(self, served, space: str | None) -> str:
        """What two branches of one union may not share: the type, or the full name of a named type."""
        kind = served if isinstance(served, str) else served["type"]
        if isinstance(served, dict) and kind in ("record", "error", "enum", "fixed"):
            return _join(served.get("namespace", space) or None, served["name"])
        if kind in PRIMITIVES or kind in ("array", "map"):
            return kind
        return kind if "." in kind else (_join(space, kind) if _join(space, kind) in self.known else kind)

    def define(self, node: dict, space: str | None) -> tuple[dict, str | None]:
        """The head of a named type's served form ({type, name[, namespace][, doc]}), the name now known."""
        name, own = _full_name(node, space)
        full = _join(own, name)
        if own is None and name in PRIMITIVES:
            raise InvalidSchema(f"Invalid schema: a type may not be named after the primitive {name!r}")
        if full in self.known:
            raise InvalidSchema(f"Invalid schema: can't redefine {full!r}")
        self.known.add(full)
        head = {"type": node["type"], "name": name}
        if own != space:
            head["namespace"] = own or ""
        if isinstance(node.get("doc"), str):
            head["doc"] = node["doc"]
        return head, own

    @staticmethod
    def aliases(node: dict, own: str | None) -> dict:
        aliases = node.get("aliases")
        if not aliases:
            return {}
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InvalidSchema(f"Invalid schema: aliases must be a list of names: {aliases!r}")
        return {"aliases": [_relative(a if "." in a else _join(own, a), own) for a in aliases]}

    def record(self, node: dict, kind: str, space: str | None) -> dict:
        head, own = self.define(node, space)
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise InvalidSchema(f"Invalid schema: record {head['name']!r} has no fields list")
        served, names = [], set()
        for f in fields:
            if not isinstance(f, dict):
                raise InvalidSchema(f"Invalid schema: field {f!r} of {head['name']!r} is not an object")
            _check_name(f.get("name"), "field name")
            if f["name"] in names:
                raise InvalidSchema(f"Invalid schema: duplicate field {f['name']!r} in {head['name']!r}")
            names.add(f["name"])
            served.append(self.field(f, own))
        return {**head, "fields": served, **_props(node, SCHEMA_RESERVED), **self.aliases(node, own)}

    def field(self, f: dict, space: str | None) -> dict:
        if "type" not in f:
            raise InvalidSchema(f"Invalid schema: field {f['name']!r} has no type")
        out = {"name": f["name"], "type": self.schema(f["type"], space)}
        if isinstance(f.get("doc"), str):
            out["doc"] = f["doc"]
        if "default" in f:
            out["default"] = f["default"]
        order = f.get("order", "ascending")
        if order not in ORDERS:
            raise InvalidSchema(f"Invalid schema: field {f['name']!r} has order {order!r}: one of "
                                + ", ".join(ORDERS))
        if order != "ascending":
            out["order"] = order
        if f.get("aliases"):
            if not isinstance(f["aliases"], list) or not all(isinstance(a, str) for a in f["aliases"]):
                raise InvalidSchema(f"Invalid schema: aliases of field {f['name']!r} must be a list of names")
            out["aliases"] = list(f["aliases"])
        return {**out, **_props(f, FIELD_RESERVED)}

    def enum(self, node: dict, space: str | None) -> dict:
        head, own = self.define(node, space)
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise InvalidSchema(f"Invalid schema: enum {head['name']!r} has no symbols list")
        for symbol in symbols:
            _check_name(symbol, "enum symbol")
        if len(set(symbols)) != len(symbols):
            raise InvalidSchema(f"Invalid schema: duplicate symbol in enum {head['name']!r}")
        out = {**head, "symbols": list(symbols)}
        if "default" in node:
            if node["default"] not in symbols:
                raise InvalidSchema(f"Invalid schema: the default {node['default']!r} of enum "
                                    f"{head['name']!r} is not one of its symbols")
            out["default"] = node["default"]
        return {**out, **_props(node, ENUM_RESERVED), **self.aliases(node, own)}

    def fixed(self, node: dict, space: str | None) -> dict:
        head, own = self.define(node, space)
        size = node.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidSchema(f"Invalid schema: fixed {head['name']!r} has an invalid or no size")
        return {**head, "size": size, **_props(node, SCHEMA_RESERVED), **self.aliases(node, own)}
