"""Objects and arrays in JSON Schema compatibility: properties and items against open, closed and partially
open content models, as Confluent Schema Registry compares them.

A content model is open when anything may be added (additionalProperties absent or true, no
patternProperties, unevaluatedProperties absent or true), closed when nothing may (false), and partially
open when what is added must match a schema (additionalProperties, a patternProperties entry or
unevaluatedProperties given as a schema). The same holds for an array's items beyond those listed.
"""

from __future__ import annotations

from mmlog.schemas.json_model import Node
from mmlog.schemas.json_rules import bound, compatible, pattern_matches, under


def compare_object(differ, original: Node, update: Node) -> list:
    return (_required(original, update) + _properties(differ, original, update)
            + _dependencies(differ, original, update)
            + _additional(differ, original, update, "additionalProperties", "ADDITIONAL_PROPERTIES", flip=False)
            + _unevaluated(differ, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
            + bound(original, update, "maxProperties", "MAX_PROPERTIES")
            + bound(original, update, "minProperties", "MIN_PROPERTIES"))


def compare_array(differ, original: Node, update: Node) -> list:
    (all_before, listed_before, more_before), (all_after, listed_after, more_after) = _items(original), _items(update)
    found = under(("items",), differ.diff(original.sub(all_before), update.sub(all_after)))
    found += _item_list(differ, original, update, listed_before, listed_after)
    found += _additional(differ, original, update, None, "ADDITIONAL_ITEMS", flip=True,
                         values=(more_before, more_after))
    found += _unevaluated(differ, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    found += bound(original, update, "maxItems", "MAX_ITEMS") + bound(original, update, "minItems", "MIN_ITEMS")
    unique_before, unique_after = original.get("uniqueItems") is True, update.get("uniqueItems") is True
    if unique_before != unique_after:
        found.append(("UNIQUE_ITEMS_REMOVED" if unique_before else "UNIQUE_ITEMS_ADDED", ("uniqueItems",)))
    return found + bound(original, update, "maxContains", "MAX_CONTAINS") + \
        bound(original, update, "minContains", "MIN_CONTAINS")


# -- content models -----------------------------------------------------------------------------------

def _more(node: Node, value) -> tuple[bool, Node | None]:
    """(whether more properties or items are permitted, the schema they must match if one is given)."""
    if value is False:
        return False, None
    return True, (None if value is None or value is True else node.sub(value))


def _uneval(node: Node, keyword: str) -> Node | None:
    value = node.get(keyword)
    return None if value is None else node.sub(value)


def _is_open(node: Node, more, uneval_keyword: str, patterns=False) -> bool:
    permits, schema = _more(node, more)
    if not permits or schema is not None or (patterns and node.get("patternProperties")):
        return False
    uneval = _uneval(node, uneval_keyword)
    return uneval is None or uneval.kind == "empty"


def _partial(node: Node, more, uneval_keyword: str, name: str | None = None) -> Node | None:
    """The schema an added property (named `name`) or item must match in a partially open model."""
    if name is not None:
        for pattern, schema in (node.get("patternProperties") or {}).items():
            if pattern_matches(pattern, name):
                return node.sub(schema)
    permits, schema = _more(node, more)
    if schema is not None:
        return schema
    uneval = _uneval(node, uneval_keyword)
    if permits and uneval is not None and uneval.kind not in ("false", "empty"):
        return uneval
    return None


def _covered(differ, before: Node, after: Node, where: tuple, yes: str, no: str) -> list:
    found = under(where, differ.diff(before, after))
    return found + [(yes if compatible(found) else no, where)]


# -- objects ------------------------------------------------------------------------------------------

def _required(original: Node, update: Node) -> list:
    before, after = set(original.get("required") or ()), set(update.get("required") or ())
    properties, found = update.subs("properties"), []
    for name in original.subs("properties"):
        if name not in properties:
            continue
        where = ("required", name)
        if name in before and name not in after:
            found.append(("REQUIRED_ATTRIBUTE_REMOVED", where))
        elif name in after and name not in before:
            found.append(("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if properties[name].has_default
                          else "REQUIRED_ATTRIBUTE_ADDED", where))
    return found


def _properties(differ, original: Node, update: Node) -> list:
    before, after = original.subs("properties"), update.subs("properties")
    more_before, more_after = original.get("additionalProperties"), update.get("additionalProperties")
    found = []
    for name in [*before, *(n for n in after if n not in before)]:
        where = ("properties", name)
        if name not in after:
            found += _property_removed(differ, before[name], update, more_after, name, where)
        elif name not in before:
            found += _property_added(differ, original, update, after[name], more_before, name, where)
        else:
            found += under(where, differ.diff(before[name], after[name]))
    return found


def _property_removed(differ, schema: Node, update: Node, more, name: str, where: tuple) -> list:
    if _is_open(update, more, "unevaluatedProperties", patterns=True):
        return [("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)]
    partial = _partial(update, more, "unevaluatedProperties", name)
    if partial is not None:
        return _covered(differ, schema, partial, where, "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if schema.kind == "false":
        return [("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
    return [("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]


def _property_added(differ, original: Node, update: Node, schema: Node, more, name: str, where: tuple) -> list:
    required = name in (update.get("required") or ())
    if _is_open(original, more, "unevaluatedProperties", patterns=True):
        if schema.kind == "empty":
            return [("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)]
        if required:
            return [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if schema.has_default
                     else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)]
        return [("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)]
    found = []
    partial = _partial(original, more, "unevaluatedProperties", name)
    if partial is not None:
        found = _covered(differ, partial, schema, where, "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                         "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required:
        return found + [("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if schema.has_default
                         else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)]
    return found + [("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)]


def _split_dependencies(node: Node) -> tuple[dict, dict]:
    """(property -> the properties it requires, property -> the schema it brings in)."""
    arrays, schemas = {}, {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        for name, value in (node.get(keyword) or {}).items():
            if isinstance(value, list):
                arrays[name] = set(value)
            else:
                schemas[name] = node.sub(value)
    return arrays, schemas


def _dependencies(differ, original: Node, update: Node) -> list:
    (arrays_before, schemas_before), (arrays_after, schemas_after) = \
        _split_dependencies(original), _split_dependencies(update)
    found = []
    for name in sorted(arrays_before.keys() | arrays_after.keys()):
        before, after, where = arrays_before.get(name), arrays_after.get(name), ("dependencies", name)
        if after is None:
            found.append(("DEPENDENCY_ARRAY_REMOVED", where))
        elif before is None:
            found.append(("DEPENDENCY_ARRAY_ADDED", where))
        elif before != after:
            found.append(("DEPENDENCY_ARRAY_EXTENDED" if after >= before else "DEPENDENCY_ARRAY_NARROWED"
                          if before >= after else "DEPENDENCY_ARRAY_CHANGED", where))
    for name in sorted(schemas_before.keys() | schemas_after.keys()):
        before, after, where = schemas_before.get(name), schemas_after.get(name), ("dependencies", name)
        if after is None:
            found.append(("DEPENDENCY_SCHEMA_REMOVED", where))
        elif before is None:
            found.append(("DEPENDENCY_SCHEMA_ADDED", where))
        else:
            found += under(where, differ.diff(before, after))
    return found


def _additional(differ, original: Node, update: Node, keyword, kind: str, flip: bool, values=None) -> list:
    """additionalProperties (or an array's additional items) opened, closed, narrowed or widened."""
    before, after = values if values is not None else (original.get(keyword), update.get(keyword))
    (permits_before, schema_before), (permits_after, schema_after) = _more(original, before), _more(update, after)
    where = ("additionalItems" if flip else "additionalProperties",)
    if permits_before != permits_after:
        return [(f"{kind}_ADDED" if permits_after else f"{kind}_REMOVED", where)]
    if schema_before is None and schema_after is not None:
        return [(f"{kind}_NARROWED", where)]
    if schema_after is None and schema_before is not None:
        return [(f"{kind}_EXTENDED", where)]
    return under(where, differ.diff(schema_before, schema_after))


def _unevaluated(differ, original: Node, update: Node, keyword: str, kind: str) -> list:
    before, after = _uneval(original, keyword), _uneval(update, keyword)
    if before is None and after is None:
        return []
    where = (keyword,)
    if before is None:
        return [(f"{kind}_REMOVED" if after.kind == "false" else f"{kind}_NARROWED", where)]
    if after is None:
        return [(f"{kind}_ADDED" if before.kind == "false" else f"{kind}_EXTENDED", where)]
    if before.kind == "false" and after.kind != "false":
        return [(f"{kind}_ADDED", where)]
    if before.kind != "false" and after.kind == "false":
        return [(f"{kind}_REMOVED", where)]
    if before.kind == "empty" and after.kind != "empty":
        return [(f"{kind}_NARROWED", where)]
    if before.kind != "empty" and after.kind == "empty":
        return [(f"{kind}_EXTENDED", where)]
    return under(where, differ.diff(before, after))


# -- arrays -------------------------------------------------------------------------------------------

def _items(node: Node) -> tuple:
    """(the schema of every item, the schemas of the first items in order, what may follow those)."""
    items = node.get("items")
    if node.get("prefixItems") is not None or (node.model.siblings and isinstance(items, bool)):
        return None, node.get("prefixItems") or [], items  # from 2020-12, items says what may follow
    if isinstance(items, list):
        return None, items, node.get("additionalItems")
    return items, [], node.get("additionalItems")


def _item_list(differ, original: Node, update: Node, before: list, after: list) -> list:
    more_before, more_after = _items(original)[2], _items(update)[2]
    found = []
    for index in range(max(len(before), len(after))):
        where = (f"items/{index}",)
        if index < len(before) and index < len(after):
            found += under(where, differ.diff(original.sub(before[index]), update.sub(after[index])))
        elif index < len(before):
            found += _item_removed(differ, original.sub(before[index]), update, more_after, where)
        else:
            found += _item_added(differ, original, update.sub(after[index]), more_before, where)
    return found


def _item_removed(differ, schema: Node, update: Node, more, where: tuple) -> list:
    if _is_open(update, more, "unevaluatedItems"):
        return [("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)]
    partial = _partial(update, more, "unevaluatedItems")
    if partial is not None:
        return _covered(differ, schema, partial, where, "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    return [("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL" if schema.kind == "false"
             else "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]


def _item_added(differ, original: Node, schema: Node, more, where: tuple) -> list:
    if _is_open(original, more, "unevaluatedItems"):
        return [("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if schema.kind == "empty"
                 else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)]
    partial = _partial(original, more, "unevaluatedItems")
    if partial is not None:
        return _covered(differ, partial, schema, where, "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    return [("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)]
