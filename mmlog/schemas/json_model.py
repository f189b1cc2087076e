"""A JSON Schema seen as typed parts, the way Confluent Schema Registry's comparison sees it.

One schema object may say several things at once; it becomes one node per thing said, all of them
required together (a synthetic allOf): its type (several types are an anyOf of one node per type; with no
`type`, one node per kind of keyword present, as `minLength` for a string), its `enum`, `const` and `not`,
each of allOf/anyOf/oneOf, and if/then/else. `true` and `{}` are the empty schema, `false` the false one;
a `$ref` is followed when compared. Nodes are made once per schema object, so recursive schemas end.
"""

from __future__ import annotations

import json

# The keywords that make a schema without `type` one of a kind, as the `type` would.
KIND_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties", "dependencies",
               "dependentRequired", "dependentSchemas", "minProperties", "maxProperties",
               "propertyNames", "unevaluatedProperties"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "unevaluatedItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
COMBINATIONS = ("allOf", "anyOf", "oneOf")
ANNOTATIONS = frozenset(("$ref", "$id", "$schema", "$comment", "title", "description", "default", "examples",
                         "definitions", "$defs", "readOnly", "writeOnly", "deprecated"))


def enter(node, resolver, specification):
    """The resolver inside `node`: one based at its `$id` when it has one."""
    if isinstance(node, dict) and isinstance(node.get("$id"), str) and not node["$id"].startswith("#"):
        return resolver.in_subresource(specification.create_resource(node))
    return resolver


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Node:
    """One part of a schema: `kind` is empty, false, ref, string, number, boolean, null, object, array,
    enum, const, not, combined or conditional; `raw` is the schema object it is read from."""

    def __init__(self, model: "Model", kind: str, raw, resolver, criterion=None, parts=None,
                 integer=False):
        self.model, self.kind, self.raw, self.resolver = model, kind, raw, resolver
        self.criterion, self.parts, self.integer = criterion, parts, integer

    def get(self, key, default=None):
        return self.raw.get(key, default) if isinstance(self.raw, dict) else default

    def sub(self, value) -> "Node | None":
        """A subschema of this node's schema (None stays None)."""
        return None if value is None else self.model.load(value, self.resolver)

    def subs(self, key) -> dict:
        value = self.get(key)
        return {k: self.sub(v) for k, v in value.items()} if isinstance(value, dict) else {}

    @property
    def key(self) -> str:
        """What makes two subschemas of a combination the same one."""
        return f"{self.kind}:{self.integer}:{canonical(self.raw)}"

    @property
    def has_default(self) -> bool:
        return isinstance(self.raw, dict) and "default" in self.raw


class Model:
    """Loads a parsed JsonSchema's document (or a part of it) into nodes, each schema object once."""

    def __init__(self, schema):
        self.specification = schema.specification
        self.siblings = schema.refs_may_have_siblings
        self.made: dict = {}
        self.kept: list = []  # the objects made here, so that their ids stay theirs

    def root(self, schema) -> Node:
        return self.load(schema.document, schema.resolver)

    def once(self, raw, variant: str, make) -> Node:
        key = (id(raw), variant)
        if key not in self.made:
            self.kept.append(raw)
            self.made[key] = make()
        return self.made[key]

    def load(self, raw, resolver) -> Node:
        if raw is True or raw == {}:
            return self.once(raw, "", lambda: Node(self, "empty", raw, resolver))
        if raw is False or not isinstance(raw, dict):
            return self.once(raw, "", lambda: Node(self, "false", raw, resolver))
        resolver = enter(raw, resolver, self.specification)
        return self.once(raw, "", lambda: self.make(raw, resolver))

    def make(self, raw: dict, resolver) -> Node:
        if isinstance(raw.get("$ref"), str):
            ref = Node(self, "ref", raw, resolver)
            rest = {k: v for k, v in raw.items() if k not in ANNOTATIONS}
            if not self.siblings or not rest:
                return ref
            self.kept.append(rest)
            return Node(self, "combined", raw, resolver, "allOf", [ref, self.make(rest, resolver)])
        parts = [Node(self, "combined", raw, resolver, c, [self.load(s, resolver) for s in raw[c]])
                 for c in COMBINATIONS if isinstance(raw.get(c), list)]
        types = raw.get("type")
        types = [types] if isinstance(types, str) else types if isinstance(types, list) else \
            [kind for kind, keywords in KIND_KEYWORDS.items() if any(k in raw for k in keywords)]
        typed = [self.typed(raw, resolver, t) for t in types]
        if len(typed) > 1 and "type" in raw:
            parts.append(Node(self, "combined", raw, resolver, "anyOf", typed))
        else:
            parts.extend(typed)
        for keyword in ("enum", "const", "not"):
            if keyword in raw:
                parts.append(Node(self, keyword, raw, resolver))
        if "if" in raw:
            parts.append(Node(self, "conditional", raw, resolver))
        if not parts:
            return Node(self, "empty", raw, resolver)
        return parts[0] if len(parts) == 1 else Node(self, "combined", raw, resolver, "allOf", parts)

    def typed(self, raw: dict, resolver, kind: str) -> Node:
        if kind == "integer":
            return Node(self, "number", raw, resolver, integer=True)
        return Node(self, kind, raw, resolver)

    def follow(self, node: Node) -> Node:
        """The schema a `$ref` node names (through chains of them); any other node itself."""
        seen = set()
        while node.kind == "ref":
            if id(node) in seen:
                return self.load(True, node.resolver)  # a $ref naming only itself constrains nothing
            seen.add(id(node))
            resolved = node.resolver.lookup(node.raw["$ref"])
            node = self.load(resolved.contents, resolved.resolver)
        return node
