"""Avro schemas as the registry holds them: the text served (Confluent's canonical form), what makes two
registrations the same, references to other subjects' types, what is rejected, and Avro's resolution rules
for a reader against a writer, checked against fastavro actually reading the writer's data."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import schemaless_reader, schemaless_writer

from mmlog.schemas import InvalidSchema, parse


def avro(schema, references=()):
    return parse("AVRO", json.dumps(schema) if not isinstance(schema, str) else schema, list(references))


def record(*fields, name="User", namespace="com.example", **extra):
    return avro({"type": "record", "name": name, "namespace": namespace, "fields": list(fields), **extra})


# -- the text served -------------------------------------------------------------------------------------

def test_the_text_is_compact_and_whitespace_does_not_make_another_version():
    spaced = '{\n  "type" : "record",\n  "name" : "User",\n  "fields" : [ {"name": "id", "type": "long"} ]\n}'
    compact = '{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}'
    assert avro(spaced).text == compact
    assert avro(spaced).identity == avro(compact).identity


def test_reserved_attributes_are_served_in_avros_order_whatever_order_they_were_written_in():
    written = {"fields": [{"type": "string", "doc": "who", "name": "name"}], "doc": "a user",
               "namespace": "com.example", "name": "User", "type": "record"}
    assert avro(written).text == ('{"type":"record","name":"User","namespace":"com.example","doc":"a user",'
                                  '"fields":[{"name":"name","type":"string","doc":"who"}]}')
    assert avro(written).identity == record({"name": "name", "type": "string", "doc": "who"},
                                            doc="a user").identity


def test_other_attributes_are_kept_after_the_reserved_ones_in_the_order_written():
    schema = record({"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                                "scale": 2}, "x-field": 1},
                    {"name": "tag", "type": "string", "default": "none", "order": "descending",
                     "aliases": ["label"]},
                    aliases=["Person"], **{"x-owner": "billing"})
    assert schema.text == (
        '{"type":"record","name":"User","namespace":"com.example","fields":['
        '{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2},"x-field":1},'
        '{"name":"tag","type":"string","default":"none","order":"descending","aliases":["label"]}],'
        '"x-owner":"billing","aliases":["Person"]}')


def test_a_primitive_is_served_as_its_name():
    assert avro('"string"').text == '"string"'
    assert avro({"type": "string"}).text == '"string"'
    assert avro({"type": "int", "logicalType": "date"}).text == '{"type":"int","logicalType":"date"}'


def test_a_dotted_name_is_served_as_name_and_namespace_and_nested_types_drop_the_namespace_they_inherit():
    schema = avro({"type": "record", "name": "com.example.Order", "fields": [
        {"name": "status", "type": {"type": "enum", "name": "Status", "namespace": "com.example",
                                    "symbols": ["NEW", "PAID"], "default": "NEW"}},
        {"name": "previous", "type": ["null", "com.example.Status"], "default": None},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "namespace": "other", "size": 16}}]})
    assert schema.text == (
        '{"type":"record","name":"Order","namespace":"com.example","fields":['
        '{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"],"default":"NEW"}},'
        '{"name":"previous","type":["null","Status"],"default":null},'
        '{"name":"hash","type":{"type":"fixed","name":"Hash","namespace":"other","size":16}}]}')


def test_the_text_served_parses_back_to_itself():
    schema = avro({"type": "record", "name": "R", "namespace": "a", "fields": [
        {"name": "b", "type": {"type": "record", "name": "x.B", "fields": [
            {"name": "c", "type": {"type": "enum", "name": "C", "namespace": "a", "symbols": ["X"]}},
            {"name": "d", "type": "a.C"}]}},
        {"name": "b2", "type": "x.B"}, {"name": "c2", "type": "a.C"}]})
    assert '{"name":"d","type":"a.C"}' in schema.text and '{"name":"c2","type":"C"}' in schema.text
    assert avro(schema.text).text == schema.text


# -- references --------------------------------------------------------------------------------------------

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.example",
           "fields": [{"name": "street", "type": "string"}]}


def test_a_record_type_defined_in_another_subjects_schema_is_named_not_copied():
    reference = ("com.example.Address", "AVRO", json.dumps(ADDRESS))
    user = avro({"type": "record", "name": "User", "namespace": "com.example",
                 "fields": [{"name": "home", "type": "Address"}]}, [reference])
    assert user.text == ('{"type":"record","name":"User","namespace":"com.example",'
                         '"fields":[{"name":"home","type":"Address"}]}')
    elsewhere = avro({"type": "record", "name": "Shop", "namespace": "org.shop",
                      "fields": [{"name": "at", "type": "com.example.Address"}]}, [reference])
    assert '"type":"com.example.Address"' in elsewhere.text


def test_references_come_dependencies_first_and_each_sees_the_ones_before_it():
    address = ("com.example.Address", "AVRO", json.dumps(ADDRESS))
    customer = ("com.example.Customer", "AVRO", json.dumps(
        {"type": "record", "name": "Customer", "namespace": "com.example",
         "fields": [{"name": "address", "type": "Address"}]}))
    order = avro({"type": "record", "name": "Order", "namespace": "com.example",
                  "fields": [{"name": "by", "type": "Customer"}, {"name": "to", "type": "Address"}]},
                 [address, customer])
    assert order.text.endswith('"fields":[{"name":"by","type":"Customer"},{"name":"to","type":"Address"}]}')


def test_a_type_named_but_not_given_is_invalid():
    with pytest.raises(InvalidSchema, match="Address"):
        avro({"type": "record", "name": "User", "fields": [{"name": "home", "type": "Address"}]})


def test_a_schema_may_not_redefine_a_type_its_references_define():
    with pytest.raises(InvalidSchema, match="redefine"):
        avro(ADDRESS, [("com.example.Address", "AVRO", json.dumps(ADDRESS))])


# -- what is rejected ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, reason", [
    ('{"type": "record", "name": "User", "fields": [', "not JSON"),
    ('"integer"', "unknown type"),
    ('{"type": "recrod", "name": "User", "fields": []}', "unknown type"),
    ('{"type": "record", "name": "1User", "fields": []}', "illegal name"),
    ('{"type": "record", "name": "User-1", "fields": []}', "illegal name"),
    ('{"type": "record", "name": "User", "namespace": "com.1example", "fields": []}', "illegal namespace"),
    ('{"type": "record", "name": "User", "fields": [{"name": "a b", "type": "int"}]}', "illegal field name"),
    ('{"type": "record", "name": "User"}', "no fields"),
    ('{"type": "record", "fields": []}', "no name"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]}',
     "duplicate field"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int", "default": "zero"}]}', "Default"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int", "default": null}]}', "Default"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a"}]}', "no type"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "duplicate symbol"),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "not one of its symbols"),
    ('{"type": "enum", "name": "E", "symbols": ["1A"]}', "illegal enum symbol"),
    ('{"type": "fixed", "name": "F", "size": -1}', "size"),
    ('{"type": "fixed", "name": "F"}', "size"),
    ('["null", "string", "null"]', "duplicate"),
    ('["null", ["int", "long"]]', "union"),
    ('{"type": "array"}', "items"),
    ('{"type": "map", "values": "nothing"}', "unknown type"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int", "order": "up"}]}', "order"),
    ('{"type": "record", "name": "U", "fields": [{"name": "a", "type": {"type": "record", "name": "U", '
     '"fields": []}}]}', "redefine"),
    ('42', "not a schema"),
])
def test_what_confluent_rejects_is_invalid_with_the_reason(text, reason):
    with pytest.raises(InvalidSchema, match=f"(?i){reason}"):
        avro(text)


def test_a_recursive_type_is_valid():
    node = avro({"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]})
    assert node.text.endswith('{"name":"next","type":["null","Node"],"default":null}]}')


# -- a reader against a writer --------------------------------------------------------------------------

def reads(reader, writer, datum) -> object:
    """What fastavro reads with `reader` from `datum` written with `writer`."""
    buffer = io.BytesIO()
    schemaless_writer(buffer, writer.parsed, datum)
    buffer.seek(0)
    return schemaless_reader(buffer, writer.parsed, reader.parsed)


def kinds(reader, writer) -> list[str]:
    return [reason.split("'")[1] for reason in reader.reader_problems(writer)]


def test_a_reader_with_a_new_field_reads_old_data_only_when_the_field_has_a_default():
    old = record({"name": "id", "type": "long"})
    with_default = record({"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""})
    without = record({"name": "id", "type": "long"}, {"name": "email", "type": "string"})
    assert with_default.reader_problems(old) == []
    assert reads(with_default, old, {"id": 1}) == {"id": 1, "email": ""}
    assert without.reader_problems(old) == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'email' at path '/fields/1' "
        "in the reader schema has no default value and is missing in the writer schema', additionalInfo:'email'}"]


def test_a_reader_ignores_fields_it_does_not_have():
    old = record({"name": "id", "type": "long"}, {"name": "email", "type": "string"})
    new = record({"name": "id", "type": "long"})
    assert new.reader_problems(old) == []
    assert reads(new, old, {"id": 1, "email": "a@b"}) == {"id": 1}


@pytest.mark.parametrize("writer, reader", [("int", "long"), ("int", "float"), ("int", "double"),
                                            ("long", "float"), ("long", "double"), ("float", "double"),
                                            ("string", "bytes"), ("bytes", "string")])
def test_a_reader_reads_the_narrower_types_avro_promotes(writer, reader):
    old, new = record({"name": "v", "type": writer}), record({"name": "v", "type": reader})
    assert new.reader_problems(old) == []
    reads(new, old, {"v": 7 if writer in ("int", "long") else 1.5 if writer == "float" else "x"
                     if writer == "string" else b"x"})


@pytest.mark.parametrize("writer, reader", [("long", "int"), ("double", "float"), ("float", "long"),
                                            ("string", "int"), ("boolean", "int"), ("int", "string")])
def test_a_reader_of_a_narrower_or_other_type_is_a_type_mismatch(writer, reader):
    old, new = record({"name": "v", "type": writer}), record({"name": "v", "type": reader})
    [problem] = new.reader_problems(old)
    assert problem.startswith("{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type')")
    assert f"additionalInfo:'reader type: {reader.upper()} not compatible with writer type: {writer.upper()}'" \
        in problem


def test_enum_symbols_the_reader_lacks_are_missing_unless_it_has_a_default_symbol():
    old = avro({"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]})
    fewer = avro({"type": "enum", "name": "Colour", "symbols": ["RED"]})
    with_default = avro({"type": "enum", "name": "Colour", "symbols": ["RED", "OTHER"], "default": "OTHER"})
    assert kinds(fewer, old) == ["MISSING_ENUM_SYMBOLS"]
    assert "missing enum symbols '[BLUE, GREEN]' at path '/symbols'" in fewer.reader_problems(old)[0]
    assert with_default.reader_problems(old) == []
    assert old.reader_problems(fewer) == []


def test_every_branch_of_a_writer_union_must_be_readable():
    old = record({"name": "v", "type": ["null", "int", "string"]})
    assert kinds(record({"name": "v", "type": ["null", "long", "string", "bytes"]}), old) == []
    narrower = record({"name": "v", "type": ["null", "int"]})
    assert narrower.reader_problems(old) == [
        "{errorType:'MISSING_UNION_BRANCH', description:'The reader schema is missing a type inside a union "
        "field at path '/fields/0/type/2' in the writer schema', additionalInfo:'reader union lacking writer "
        "type: STRING'}"]


def test_a_union_reads_a_plain_type_it_holds_and_a_plain_type_reads_a_union_only_of_what_it_reads():
    plain, optional = record({"name": "v", "type": "string"}), record({"name": "v", "type": ["null", "string"]})
    assert optional.reader_problems(plain) == []
    assert reads(optional, plain, {"v": "x"}) == {"v": "x"}
    assert kinds(plain, optional) == ["TYPE_MISMATCH"]
    assert kinds(record({"name": "v", "type": "long"}), record({"name": "v", "type": ["int", "long"]})) == []


def test_named_types_must_keep_their_name_unless_the_reader_gives_the_old_one_as_an_alias():
    old = record({"name": "id", "type": "long"}, name="User")
    renamed = record({"name": "id", "type": "long"}, name="Person")
    aliased = record({"name": "id", "type": "long"}, name="Person", aliases=["User"])
    assert renamed.reader_problems(old) == [
        "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
        "additionalInfo:'expected: com.example.User'}"]
    assert aliased.reader_problems(old) == []


def test_a_renamed_field_reads_its_old_name_through_an_alias():
    old = record({"name": "mail", "type": "string"})
    new = record({"name": "email", "type": "string", "aliases": ["mail"]})
    assert new.reader_problems(old) == []
    assert reads(new, old, {"mail": "a@b"}) == {"email": "a@b"}


def test_fixed_sizes_must_agree_and_arrays_and_maps_are_compared_item_by_item():
    assert kinds(avro({"type": "fixed", "name": "H", "size": 16}), avro({"type": "fixed", "name": "H", "size": 32})) \
        == ["FIXED_SIZE_MISMATCH"]
    ints, longs = avro({"type": "array", "items": "int"}), avro({"type": "array", "items": "long"})
    assert longs.reader_problems(ints) == []
    assert "(path '/items')" in ints.reader_problems(longs)[0]
    assert "(path '/values')" in avro({"type": "map", "values": "int"}).reader_problems(
        avro({"type": "map", "values": "string"}))[0]


def test_recursive_types_are_compared_without_end():
    def linked(value_type):
        return avro({"type": "record", "name": "Node", "fields": [
            {"name": "value", "type": value_type}, {"name": "next", "type": ["null", "Node"]}]})
    assert linked("long").reader_problems(linked("int")) == []
    assert kinds(linked("int"), linked("long")) == ["TYPE_MISMATCH"]


def test_a_reader_of_another_schema_type_is_incompatible():
    json_schema = parse("JSON", '{"type": "string"}')
    assert avro('"string"').reader_problems(json_schema) == ["Incompatible because of different schema type"]
