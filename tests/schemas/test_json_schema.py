"""JSON Schemas as the registry holds them: the text served, references through `$ref`, what is rejected,
and Confluent's rules for whether a reader schema accepts everything valid under a writer schema."""

from __future__ import annotations

import json

import pytest

from mmlog.schemas import InvalidSchema, parse
from mmlog.schemas.compatibility import check


def js(schema, references=()):
    return parse("JSON", json.dumps(schema) if not isinstance(schema, str) else schema, list(references))


def obj(properties, **extra):
    return js({"type": "object", "properties": properties, **extra})


def kinds(reader, writer) -> list[str]:
    return [reason.split('"')[1] for reason in reader.reader_problems(writer)]


# -- the text served ---------------------------------------------------------------------------------------

def test_the_text_is_the_document_compact_in_the_order_written():
    spaced = '{\n  "type": "object",\n  "properties": {"name": {"type": "string"}},\n  "$id": "u"\n}'
    assert js(spaced).text == '{"type":"object","properties":{"name":{"type":"string"}},"$id":"u"}'
    assert js(spaced).identity == js(json.loads(spaced)).identity


def test_non_ascii_text_and_decimals_are_served_as_written():
    assert js({"description": "café"}).text == '{"description":"café"}'
    assert js('{"type": "number", "multipleOf": 0.50, "maximum": 1e10, "minimum": -3}').text == \
        '{"type":"number","multipleOf":0.50,"maximum":1E+10,"minimum":-3}'


def test_the_drafts_the_serializers_send_are_accepted():
    for dialect in ("http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
                    "https://json-schema.org/draft/2020-12/schema"):
        assert js({"$schema": dialect, "type": "object"}).schema_type == "JSON"


# -- references --------------------------------------------------------------------------------------------

CUSTOMER = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_a_ref_to_another_subjects_schema_resolves_by_the_reference_name():
    order = js({"type": "object", "properties": {"customer": {"$ref": "customer.json"}}},
               [("customer.json", "JSON", json.dumps(CUSTOMER))])
    assert order.text == '{"type":"object","properties":{"customer":{"$ref":"customer.json"}}}'


def test_a_relative_ref_resolves_against_the_schemas_id():
    order = js({"$id": "https://example.com/schemas/order.json", "type": "object",
                "properties": {"customer": {"$ref": "customer.json"}}},
               [("customer.json", "JSON", json.dumps(CUSTOMER))])
    assert order.reader_problems(order) == []


def test_a_ref_may_name_a_drafts_metaschema_or_a_subschema_by_its_own_id():
    assert js({"properties": {"schema": {"$ref": "http://json-schema.org/draft-07/schema#"}}}).schema_type == "JSON"
    tree = js({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/tree",
               "type": "object", "properties": {"nodes": {"type": "array", "items": {"$ref": "node"}}},
               "$defs": {"node": {"$id": "https://example.com/node", "type": "object",
                                  "properties": {"subtree": {"$ref": "tree"}}}}})
    assert tree.reader_problems(tree) == []


def test_a_ref_to_nothing_given_is_invalid():
    with pytest.raises(InvalidSchema, match="customer.json"):
        js({"type": "object", "properties": {"customer": {"$ref": "customer.json"}}})
    with pytest.raises(InvalidSchema, match="#/definitions/missing"):
        js({"properties": {"a": {"$ref": "#/definitions/missing"}}})


def test_a_change_inside_a_referenced_schema_is_seen_through_the_ref():
    def order(customer):
        return js({"type": "object", "properties": {"customer": {"$ref": "customer.json"}}},
                  [("customer.json", "JSON", json.dumps(customer))])
    tighter = dict(CUSTOMER, properties={"name": {"type": "string", "maxLength": 10}})
    assert order(tighter).reader_problems(order(CUSTOMER)) == [
        '{errorType:"MAX_LENGTH_ADDED", description:"The keyword at path \'#/properties/customer/properties/'
        'name/maxLength\' in the reader schema is not present in the writer schema\'}']
    assert order(CUSTOMER).reader_problems(order(tighter)) == []


# -- what is rejected ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, reason", [
    ('{"type": "object",', "not JSON"),
    ('{"type": "strnig"}', "strnig"),
    ('{"type": "string", "minLength": -1}', "minLength"),
    ('{"type": "object", "required": "name"}', "required"),
    ('{"properties": {"a": {"type": 5}}}', "properties/a/type"),
    ('42', "object or a boolean"),
    ('{"$schema": "https://example.com/my-own-draft", "type": "string"}', r"unknown \$schema"),
])
def test_an_invalid_schema_is_rejected_with_the_reason(text, reason):
    with pytest.raises(InvalidSchema, match=reason):
        js(text)


# -- a reader against a writer -----------------------------------------------------------------------------

def test_a_property_added_to_an_open_content_model_is_incompatible_for_the_reader():
    old, new = obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "integer"}})
    assert new.reader_problems(old) == [
        '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The reader schema has an open '
        'content model and has a property or item at path \'#/properties/b\' which is missing in the writer '
        'schema\'}']
    assert old.reader_problems(new) == []  # removing it from an open model is fine
    assert obj({"a": {"type": "string"}, "b": {}}).reader_problems(old) == []  # unless it accepts anything


def test_a_property_added_to_a_closed_content_model_is_compatible_for_the_reader_but_not_removed():
    old = obj({"a": {"type": "string"}}, additionalProperties=False)
    new = obj({"a": {"type": "string"}, "b": {"type": "integer"}}, additionalProperties=False)
    assert new.reader_problems(old) == []
    assert kinds(old, new) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_a_partially_open_content_model_takes_properties_its_schema_covers():
    old = obj({"a": {"type": "string"}}, additionalProperties={"type": "string"})
    assert obj({"a": {"type": "string"}, "b": {"type": "string"}},
               additionalProperties={"type": "string"}).reader_problems(old) == []
    assert "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" in kinds(
        obj({"a": {"type": "string"}, "b": {"type": "integer"}}, additionalProperties={"type": "string"}), old)


def test_a_required_property_needs_a_default_to_be_added_and_may_always_be_dropped():
    old = obj({"a": {"type": "string"}})
    assert kinds(obj({"a": {"type": "string"}}, required=["a"]), old) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert obj({"a": {"type": "string", "default": ""}}, required=["a"]).reader_problems(old) == []
    assert old.reader_problems(obj({"a": {"type": "string"}}, required=["a"])) == []


@pytest.mark.parametrize("writer, reader, found", [
    ({"type": "string"}, {"type": ["string", "null"]}, []),
    ({"type": ["string", "null"]}, {"type": "string"}, ["TYPE_CHANGED"]),
    ({"type": "integer"}, {"type": "number"}, []),
    ({"type": "number"}, {"type": "integer"}, ["TYPE_NARROWED"]),
    ({"type": "string"}, {"type": "integer"}, ["TYPE_CHANGED"]),
    ({"type": "string"}, {}, []),
    ({}, {"type": "string"}, ["TYPE_CHANGED"]),
    ({"type": "string"}, {"oneOf": [{"type": "string"}, {"type": "integer"}]}, []),
])
def test_types_may_widen_but_not_narrow_or_change(writer, reader, found):
    assert kinds(js(reader), js(writer)) == found


@pytest.mark.parametrize("writer, reader, found", [
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 20}, []),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_DECREASED"]),
    ({"type": "string", "maxLength": 10}, {"type": "string"}, []),
    ({"type": "string"}, {"type": "string", "minLength": 1}, ["MIN_LENGTH_ADDED"]),
    ({"type": "string", "minLength": 2}, {"type": "string", "minLength": 1}, []),
    ({"type": "string"}, {"type": "string", "pattern": "^a"}, ["PATTERN_ADDED"]),
    ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, ["PATTERN_CHANGED"]),
    ({"type": "string", "pattern": "^a"}, {"type": "string"}, []),
    ({"type": "number", "minimum": 0}, {"type": "number", "minimum": 1}, ["MINIMUM_INCREASED"]),
    ({"type": "number", "maximum": 10}, {"type": "number", "maximum": 100}, []),
    ({"type": "number", "exclusiveMaximum": 10}, {"type": "number", "exclusiveMaximum": 5},
     ["EXCLUSIVE_MAXIMUM_DECREASED"]),
    ({"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 4}, ["MULTIPLE_OF_EXPANDED"]),
    ({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}, []),
    ({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "number"}}, []),
    ({"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "integer"}},
     ["TYPE_NARROWED"]),
    ({"type": "array"}, {"type": "array", "maxItems": 3}, ["MAX_ITEMS_ADDED"]),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ({"type": "object"}, {"type": "object", "maxProperties": 3}, ["MAX_PROPERTIES_ADDED"]),
])
def test_constraints_may_loosen_but_not_tighten(writer, reader, found):
    assert kinds(js(reader), js(writer)) == found


def test_enum_values_may_be_added_but_not_removed():
    assert js({"enum": ["a", "b", "c"]}).reader_problems(js({"enum": ["a", "b"]})) == []
    assert kinds(js({"enum": ["a"]}), js({"enum": ["a", "b"]})) == ["ENUM_ARRAY_NARROWED"]
    assert kinds(js({"enum": ["a", "c"]}), js({"enum": ["a", "b"]})) == ["ENUM_ARRAY_CHANGED"]


def test_combined_schemas_are_matched_subschema_by_subschema():
    one = js({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    more = js({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]})
    assert more.reader_problems(one) == []
    assert kinds(one, more) == ["SUM_TYPE_NARROWED"]
    changed = js({"oneOf": [{"type": "string"}, {"type": "boolean"}]})
    assert kinds(changed, one) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]
    assert kinds(js({"allOf": [{"type": "string"}, {"maxLength": 3}]}),
                 js({"anyOf": [{"type": "string"}, {"maxLength": 3}]})) == ["COMBINED_TYPE_CHANGED"]


def test_a_recursive_schema_is_compared_without_end():
    def tree(value):
        return js({"type": "object", "properties": {"value": value,
                                                    "children": {"type": "array", "items": {"$ref": "#"}}}})
    assert tree({"type": "number"}).reader_problems(tree({"type": "integer"})) == []
    assert kinds(tree({"type": "integer"}), tree({"type": "number"})) == ["TYPE_NARROWED"]


@pytest.mark.parametrize("writer, reader, found", [
    ({"type": "object", "dependencies": {"a": ["b", "c"]}}, {"type": "object", "dependencies": {"a": ["b"]}}, []),
    ({"type": "object", "dependencies": {"a": ["b"]}}, {"type": "object", "dependencies": {"a": ["b", "c"]}},
     ["DEPENDENCY_ARRAY_EXTENDED"]),
    ({"type": "object"}, {"type": "object", "dependencies": {"a": {"required": ["b"]}}}, ["DEPENDENCY_SCHEMA_ADDED"]),
    ({"not": {"type": "string"}}, {"not": {"type": ["string", "null"]}}, ["NOT_TYPE_EXTENDED"]),
    ({"not": {"type": ["string", "null"]}}, {"not": {"type": "string"}}, []),
    ({"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
     {"type": "object", "properties": {"x-id": {"type": "string"}}, "patternProperties": {"^x-": {"type": "string"}}},
     []),
    ({"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
     {"type": "object", "properties": {"x-id": {"type": "integer"}}, "patternProperties": {"^x-": {"type": "string"}}},
     ["TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ({"type": "object"}, {"type": "object", "additionalProperties": False}, ["ADDITIONAL_PROPERTIES_REMOVED"]),
    ({"type": "object", "additionalProperties": False}, {"type": "object"}, []),
    ({"type": "object"}, {"type": "object", "additionalProperties": {"type": "string"}},
     ["ADDITIONAL_PROPERTIES_NARROWED"]),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
      "prefixItems": [{"type": "string"}], "items": False},
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
      "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False}, []),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": [{"type": "string"}]},
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
      "prefixItems": [{"type": "string"}, {"type": "integer"}]}, ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
      "properties": {"a": {"type": "string"}}},
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
      "properties": {"a": {"type": "string"}}, "unevaluatedProperties": False}, ["UNEVALUATED_PROPERTIES_REMOVED"]),
])
def test_dependencies_not_and_content_models_follow_confluents_rules(writer, reader, found):
    assert kinds(js(reader), js(writer)) == found


def test_schemas_whose_branches_refer_back_to_them_compare_in_reasonable_time():
    def catalogue(tag):
        defs = {"Id": {"type": "object", "properties": {"id": {"type": "string"}}},
                "ItemOrId": {"oneOf": [{"$ref": "#/$defs/Id"}, {"$ref": "#/$defs/Item"}]},
                "Item": {"oneOf": [{"$ref": f"#/$defs/Kind{k}"} for k in range(10)]}}
        for k in range(10):
            links = {f"link{n}": {"$ref": "#/$defs/ItemOrId"} for n in range(4)}
            defs[f"Kind{k}"] = {"type": "object", "properties": {**links, "tag": {"const": f"{tag}{k}"}}}
        return js({"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs,
                   "$ref": "#/$defs/Item"})
    assert catalogue("kind").reader_problems(catalogue("kind")) == []
    assert kinds(catalogue("sort"), catalogue("kind")) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]


def test_a_changed_condition_is_taken_as_incompatible():
    def conditional(then):
        return js({"if": {"properties": {"kind": {"const": "a"}}}, "then": then})
    assert conditional({"required": ["a"]}).reader_problems(conditional({"required": ["a"]})) == []
    assert kinds(conditional({"required": ["b"]}), conditional({"required": ["a"]})) == [
        "COMBINED_TYPE_SUBSCHEMAS_CHANGED"]


def test_under_backward_the_reader_is_the_new_schema():
    old, new = obj({"a": {"type": "string"}}), obj({"a": {"type": "string", "maxLength": 3}})
    assert check("BACKWARD", new, [old]) == [
        '{errorType:"MAX_LENGTH_ADDED", description:"The keyword at path \'#/properties/a/maxLength\' in the new '
        'schema is not present in the old schema\'}', "{oldSchema: '" + old.text + "'}"]
    assert check("FORWARD", new, [old]) == []
