"""JSON Schema compatibility as Confluent Schema Registry decides it: the differences between the schema
data was written with (the writer) and the one reading it (the reader), each of a named kind that is
compatible or not.

The reader may accept more than the writer did: types widened (integer to number, a type into an anyOf
holding it), constraints loosened or removed (maxLength, maximum, minItems, pattern...), enum values added,
required properties dropped, properties removed where the reader's content model is open (no
additionalProperties, or true), properties added where the writer's model is closed (additionalProperties
false) or covered by the writer's additionalProperties/patternProperties schema. Anything else is
incompatible: a property added to an open model (data may already hold it with another type) unless its
schema is empty, a property removed from a closed one, a required property added without a default,
tightened constraints, changed types. allOf/anyOf/oneOf are compared subschema by subschema, matched as
Confluent matches them; `$ref`s are followed, and a recursive pair met again is taken as compatible.

Where this differs from Confluent: any change to if/then/else is reported incompatible (conservatively;
Confluent does not compare them), and like Confluent, `contains`, `propertyNames` and `format` are not
compared. Types, kinds and locations are Confluent's; the order of the reasons may differ.
"""

from __future__ import annotations

from mmlog.schemas import json_objects
from mmlog.schemas.json_model import Model, Node, canonical
from mmlog.schemas.json_rules import COMPATIBLE, bound, compatible, describe, multiple_of, under


def reader_problems(reader, writer) -> list[str]:
    """Confluent's verbose reasons why `reader` (a JsonSchema) cannot read data valid under `writer`."""
    differ = _Differ(Model(writer), Model(reader))
    found = differ.diff(differ.writer.root(writer), differ.reader.root(reader))
    return [describe(kind, "#/" + "/".join(path)) for kind, path in found if kind not in COMPATIBLE]


class _Differ:
    """One comparison of a writer's schema (the original) with a reader's (the update)."""

    def __init__(self, writer: Model, reader: Model):
        self.writer, self.reader = writer, reader
        self.done: dict = {}
        self.in_progress: set = set()
        self.assumed = 0  # how many times a recursive pair was taken as compatible

    def diff(self, original: Node | None, update: Node | None) -> list:
        if original is None and update is None:
            return []
        if original is None:
            return [("SCHEMA_ADDED", ())]
        if update is None:
            return [("SCHEMA_REMOVED", ())]
        original, update = original.model.follow(original), update.model.follow(update)
        key = (id(original), id(update))
        if key in self.done:
            return self.done[key]
        if key in self.in_progress:
            self.assumed += 1
            return []
        self.in_progress.add(key)
        assumed = self.assumed
        try:
            found = self.types(original, update)
        finally:
            self.in_progress.discard(key)
        if self.assumed == assumed:  # a result resting on an assumption is not kept for other paths
            self.done[key] = found
        return found

    def types(self, original: Node, update: Node) -> list:
        if original.kind != "combined" and update.kind == "combined":
            found = self.into_combined(original, update)
            if found is not None:
                return found
        elif original.kind == "combined" and update.kind != "combined":
            found = self.from_combined(original, update)
            if found is not None:
                return found
        if original.kind != update.kind:
            if original.kind == "false" or update.kind == "empty":
                return []
            if original.get("connect.type") == "bytes" == update.get("connect.type"):
                return []
            return [("TYPE_CHANGED", ())]
        compare = getattr(self, f"compare_{original.kind}", None)
        return compare(original, update) if compare else []

    def into_combined(self, original: Node, update: Node):
        if len(update.parts) == 1:
            found = self.diff(original, update.parts[0])
            return found if compatible(found) else None
        if update.criterion in ("anyOf", "oneOf"):
            for part in update.parts:
                found = self.diff(original, part)
                if compatible(found):
                    return found + [("SUM_TYPE_EXTENDED", ())]
        return None

    def from_combined(self, original: Node, update: Node):
        if len(original.parts) == 1:
            found = self.diff(original.parts[0], update)
            return found if compatible(found) else None
        if original.criterion == "allOf":
            for part in original.parts:
                found = self.diff(part, update)
                if compatible(found):
                    return found + [("PRODUCT_TYPE_NARROWED", ())]
        return None

    # -- scalars ---------------------------------------------------------------------------------------

    def compare_string(self, original: Node, update: Node) -> list:
        found = bound(original, update, "maxLength", "MAX_LENGTH") + \
            bound(original, update, "minLength", "MIN_LENGTH")
        before, after = original.get("pattern"), update.get("pattern")
        if before is None and after is not None:
            found.append(("PATTERN_ADDED", ("pattern",)))
        elif before is not None and after is None:
            found.append(("PATTERN_REMOVED", ("pattern",)))
        elif before != after:
            found.append(("PATTERN_CHANGED", ("pattern",)))
        return found

    def compare_number(self, original: Node, update: Node) -> list:
        found = []
        for keyword, kind in (("maximum", "MAXIMUM"), ("minimum", "MINIMUM"),
                              ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
                              ("exclusiveMinimum", "EXCLUSIVE_MINIMUM")):
            found += bound(original, update, keyword, kind)
        found += multiple_of(original.get("multipleOf"), update.get("multipleOf"))
        if original.integer != update.integer:
            found.append(("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED", ()))
        return found

    @staticmethod
    def compare_enum(original: Node, update: Node) -> list:
        before = {canonical(v) for v in original.get("enum", ())}
        after = {canonical(v) for v in update.get("enum", ())}
        if before == after:
            return []
        kind = "ENUM_ARRAY_EXTENDED" if after >= before else \
            "ENUM_ARRAY_NARROWED" if before >= after else "ENUM_ARRAY_CHANGED"
        return [(kind, ("enum",))]

    @staticmethod
    def compare_const(original: Node, update: Node) -> list:
        same = canonical(original.get("const")) == canonical(update.get("const"))
        return [] if same else [("ENUM_ARRAY_CHANGED", ("const",))]

    def compare_not(self, original: Node, update: Node) -> list:
        found = self.diff(update.sub(update.get("not")), original.sub(original.get("not")))
        return [("NOT_TYPE_NARROWED" if compatible(found) else "NOT_TYPE_EXTENDED", ("not",))]

    @staticmethod
    def compare_conditional(original: Node, update: Node) -> list:
        keys = ("if", "then", "else")
        same = all(canonical(original.get(k)) == canonical(update.get(k)) for k in keys)
        return [] if same else [("COMBINED_TYPE_SUBSCHEMAS_CHANGED", ("if",))]

    # -- combinations ----------------------------------------------------------------------------------

    def compare_combined(self, original: Node, update: Node) -> list:
        found = _criteria(original, update)
        if found and found[0][0] == "COMBINED_TYPE_CHANGED":
            return found
        before = list({p.key: p for p in original.parts}.values())  # duplicates count once
        after = list({p.key: p for p in update.parts}.values())
        if len(before) < len(after):
            found.append(("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED", ()))
        elif len(before) > len(after):
            found.append(("PRODUCT_TYPE_NARROWED" if original.criterion == "allOf" else "SUM_TYPE_NARROWED", ()))
        edges = {i: [j for j, b in enumerate(after) if compatible(self.diff(a, b))] for i, a in enumerate(before)}
        if _matching(edges) < min(len(before), len(after)):
            found.append(("COMBINED_TYPE_SUBSCHEMAS_CHANGED", ()))
        return found

    # -- objects ---------------------------------------------------------------------------------------

    def compare_object(self, original: Node, update: Node) -> list:
        return json_objects.compare_object(self, original, update)

    def compare_array(self, original: Node, update: Node) -> list:
        return json_objects.compare_array(self, original, update)


def _criteria(original: Node, update: Node) -> list:
    before, after = original.criterion, update.criterion
    if before == after:
        return []
    single_before, single_after = len(original.parts) == 1, len(update.parts) == 1
    if after == "anyOf" or (single_before and single_after) or (single_before and after == "oneOf") \
            or (single_after and before == "allOf"):
        return [("COMBINED_TYPE_EXTENDED", ())]
    return [("COMBINED_TYPE_CHANGED", ())]


def _matching(edges: dict) -> int:
    """The size of a maximum matching of the bipartite graph `edges` (left -> right neighbours)."""
    owner: dict = {}

    def augment(left, seen) -> bool:
        for right in edges[left]:
            if right not in seen:
                seen.add(right)
                if right not in owner or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    return sum(augment(left, set()) for left in edges)


