"""The PROTOBUF schema type: what it accepts, the forms it serves, and which changes a reader survives."""

import base64

import pytest
# confluent-kafka's own helpers: what its serializer registers, how its deserializer loads what it is served
from confluent_kafka.schema_registry.protobuf import _create_index_array, _init_pool, _schema_to_str, _str_to_proto
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2, timestamp_pb2, type_pb2
from google.type import date_pb2

from mmlog.schemas import InvalidSchema, parse
from mmlog.schemas.protobuf import ProtobufSchema

PROTO3 = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

// An order as the shop writes it.
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, string> tags = 3;
  google.protobuf.Timestamp placed = 4;
  optional int64 coupon = 5;
  oneof payment {
    string card = 6;
    Transfer transfer = 7;
  }
  Status status = 8;

  message Line {
    string sku = 1;
    uint32 quantity = 2;
  }
}

message Transfer { bytes iban = 1; }

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_PAID = 1;
}
"""

PROTO2 = """
syntax = "proto2";
package legacy;

message Reading {
  required string sensor = 1;
  optional double value = 2 [default = 1.5];
  repeated int32 samples = 3 [packed = true];
  optional group Where = 4 {
    optional string room = 1;
  }
  extensions 100 to max;
}

extend Reading {
  optional string note = 100;
}
"""


def protobuf(text: str, references=()) -> ProtobufSchema:
    return parse("PROTOBUF", text, list(references))


def message(body: str, syntax: str = "proto3", package: str = "") -> ProtobufSchema:
    head = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    return protobuf(head + body)


def problems(reader: str, writer: str, syntax: str = "proto3") -> list[str]:
    return message(reader, syntax).reader_problems(message(writer, syntax))


def kinds(reader: str, writer: str, syntax: str = "proto3") -> list[tuple[str, str]]:
    return message(reader, syntax).differences(message(writer, syntax))


# --- what it accepts ---


def test_proto3_text_parses_to_its_canonical_text():
    schema = protobuf(PROTO3)
    assert schema.schema_type == "PROTOBUF"
    assert "message Order {" in schema.text and "map<string, string> tags = 3;" in schema.text
    assert "optional int64 coupon = 5;" in schema.text
    assert "oneof payment {" in schema.text
    assert "An order" not in schema.text  # comments are not part of the schema


def test_proto2_text_with_labels_defaults_groups_and_extensions_parses():
    schema = protobuf(PROTO2)
    assert 'syntax = "proto2";' in schema.text
    assert "required string sensor = 1;" in schema.text
    assert "optional double value = 2 [default = 1.5];" in schema.text
    assert "optional group Where = 4 {" in schema.text
    assert "extend Reading {" in schema.text
    assert protobuf(schema.text).identity == schema.identity


def test_text_of_base64_letters_is_still_read_as_text():
    assert protobuf("// nothing here yet\n").text == 'syntax = "proto2";\n'


def test_text_without_a_syntax_line_is_proto2():
    assert 'syntax = "proto2";' in protobuf("message A { optional int32 x = 1; }").text


@pytest.mark.parametrize("text, reason", [
    ('syntax = "proto3"; message A { int32 x = 1; foo bar }', "line 1"),
    ('syntax = "proto3"; message A { Missing m = 1; }', "Missing"),
    ('syntax = "proto3"; message A { int32 x = 1; int32 y = 1; }', "duplicate field number"),
    ('syntax = "proto3"; enum E { FIRST = 1; }', "first value must be zero"),
    ('syntax = "proto3"; message A { required int32 x = 1; }', "required"),
    ('syntax = "proto4"; message A {}', "proto4"),
    ('syntax = "proto3"; import "elsewhere.proto";', "elsewhere.proto"),
    ("bm90IGEgZGVzY3JpcHRvcg==", "neither a base64 serialized FileDescriptorProto nor .proto text"),
    ("", "empty"),
])
def test_invalid_schemas_are_refused_with_a_reason(text, reason):
    with pytest.raises(InvalidSchema, match=reason):
        protobuf(text)


def test_a_malformed_descriptor_is_refused_not_crashed_on():
    file = descriptor_pb2.FileDescriptorProto(name="x.proto", dependency=["google/protobuf/@.proto"])
    not_utf8 = file.SerializeToString().replace(b"@", b"\xff")  # a string field a pool does not check
    with pytest.raises(InvalidSchema):
        protobuf(base64.b64encode(not_utf8).decode())


def test_identity_ignores_whitespace_and_comments():
    spaced = PROTO3.replace("\n", "\n\n   ").replace("message Transfer { bytes iban = 1; }",
                                                      "/* paid by\n bank */ message Transfer {\n bytes iban=1 ;}")
    assert protobuf(spaced).identity == protobuf(PROTO3).identity


def test_identity_does_not_depend_on_how_a_type_name_is_spelled():
    relative = message("message A { B b = 1; } message B {}", package="p")
    qualified = message("message A { .p.B b = 1; } message B {}", package="p")
    assert relative.identity == qualified.identity


def test_identity_tells_different_schemas_apart():
    assert message("message A { int32 x = 1; }").identity != message("message A { int64 x = 1; }").identity


# --- the forms it serves ---


def test_text_to_serialized_to_text_keeps_the_identity():
    schema = protobuf(PROTO3)
    serialized = schema.formatted("serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert file.package == "shop.v1" and [m.name for m in file.message_type] == ["Order", "Transfer"]
    again = protobuf(serialized)
    assert again.identity == schema.identity
    assert again.formatted("") == again.text == schema.text


def test_serialized_to_text_to_serialized_keeps_the_descriptor():
    first = protobuf(protobuf(PROTO2).formatted("serialized"))
    second = protobuf(first.formatted(""))
    assert second.formatted("serialized") == first.formatted("serialized")


@pytest.mark.parametrize("module", [descriptor_pb2, struct_pb2, type_pb2, timestamp_pb2, date_pb2])
def test_a_generated_files_descriptor_survives_text_and_back(module):
    # proto2 and proto3, defaults, options of every kind, nested enums, oneofs, reserved ranges
    serialized = base64.b64encode(module.DESCRIPTOR.serialized_pb).decode()
    schema = protobuf(serialized)
    again = protobuf(schema.text)
    assert again.identity == schema.identity
    assert again.formatted("serialized") == schema.formatted("serialized")


def test_an_unknown_format_gets_the_text():
    schema = protobuf(PROTO3)
    assert schema.formatted("default") == schema.formatted("no-such-format") == schema.text


# --- imports ---


def test_well_known_imports_resolve_without_references():
    schema = protobuf("""
        syntax = "proto3";
        import "google/protobuf/any.proto";
        import "google/protobuf/wrappers.proto";
        import "google/protobuf/duration.proto";
        import "google/type/date.proto";
        message A {
          google.protobuf.Any payload = 1;
          google.protobuf.StringValue label = 2;
          google.protobuf.Duration ttl = 3;
          google.type.Date day = 4;
        }""")
    assert "google.protobuf.StringValue label = 2;" in schema.text


CUSTOMER = 'syntax = "proto3"; package crm; message Customer { string name = 1; }'


def test_imports_resolve_through_references():
    schema = protobuf('syntax = "proto3"; package shop; import "customer.proto";'
                      "message Order { crm.Customer buyer = 1; }",
                      [("customer.proto", "PROTOBUF", CUSTOMER)])
    assert 'import "customer.proto";' in schema.text
    assert "crm.Customer buyer = 1;" in schema.text


def test_references_chain_dependencies_first_and_may_be_serialized():
    address = 'syntax = "proto3"; package crm; message Address { string city = 1; }'
    customer = ('syntax = "proto3"; package crm; import "address.proto";'
                "message Customer { Address home = 1; }")
    serialized_customer = protobuf(customer, [("address.proto", "PROTOBUF", address)]).formatted("serialized")
    schema = protobuf('syntax = "proto3"; import "customer.proto"; message Order { crm.Customer buyer = 1; }',
                      [("address.proto", "PROTOBUF", address), ("customer.proto", "PROTOBUF", serialized_customer)])
    assert "crm.Customer buyer = 1;" in schema.text


def test_a_reference_of_another_schema_type_is_refused():
    with pytest.raises(InvalidSchema, match="AVRO"):
        protobuf('syntax = "proto3"; import "c.proto";', [("c.proto", "AVRO", '"string"')])


def test_an_invalid_reference_is_named_in_the_reason():
    with pytest.raises(InvalidSchema, match="customer.proto"):
        protobuf('syntax = "proto3"; import "customer.proto";', [("customer.proto", "PROTOBUF", "message {")])


# --- with confluent-kafka's serializer and deserializer ---


def generated_order_class():
    """A message class as protoc would generate it, its file descriptor built by hand (no protoc needed)."""
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    order = file.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    order.field.add(name="order_id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="orderId")
    order.field.add(name="amount_cents", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT64,
                    json_name="amountCents")
    order.field.add(name="placed", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                    type_name=".google.protobuf.Timestamp", json_name="placed")
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    return message_factory.GetMessageClass(pool.Add(file).message_types_by_name["Order"])


def test_the_schema_confluent_kafkas_serializer_registers_parses():
    order_class = generated_order_class()
    sent = _schema_to_str(order_class.DESCRIPTOR.file)  # what ProtobufSerializer registers
    schema = protobuf(sent)
    assert "int64 amount_cents = 2;" in schema.text
    assert "google.protobuf.Timestamp placed = 3;" in schema.text
    assert schema.identity == protobuf("""
        syntax = "proto3";
        package shop;
        import "google/protobuf/timestamp.proto";
        message Order {
          string order_id = 1;
          int64 amount_cents = 2;
          google.protobuf.Timestamp placed = 3;
        }""").identity


def test_confluent_kafkas_deserializer_reads_with_the_serialized_form():
    order_class = generated_order_class()
    served = protobuf(_schema_to_str(order_class.DESCRIPTOR.file)).formatted("serialized")
    pool = descriptor_pool.DescriptorPool()  # as ProtobufDeserializer builds its pool for a writer schema
    _init_pool(pool)
    file = pool.Add(_str_to_proto("default", served))
    reader_class = message_factory.GetMessageClass(file.message_types_by_name["Order"])
    data = order_class(order_id="o-1", amount_cents=1250).SerializeToString()
    assert reader_class.FromString(data).amount_cents == 1250


def test_a_nested_message_keeps_its_index_through_the_stored_text():
    # The serializer frames each record with the message's index path, nested types counted in the
    # descriptor's order, map entries included: served from the stored text, the order must be the same.
    file = descriptor_pb2.FileDescriptorProto(name="nest.proto", package="n", syntax="proto3")
    outer = file.message_type.add(name="Outer")
    F = descriptor_pb2.FieldDescriptorProto
    entry = outer.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    outer.field.add(name="counts", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                    type_name=".n.Outer.CountsEntry")
    outer.nested_type.add(name="Inner").field.add(name="x", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)
    pool = descriptor_pool.DescriptorPool()
    inner = pool.Add(file).message_types_by_name["Outer"].nested_types_by_name["Inner"]
    index = _create_index_array(inner)

    stored = protobuf(_schema_to_str(inner.file)).text
    served = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(protobuf(stored).formatted("serialized")))
    assert index == [0, 1]
    assert served.message_type[index[0]].nested_type[index[1]].name == "Inner"


def test_confluent_kafkas_deserializer_resolves_references_by_their_names():
    customer = protobuf(CUSTOMER)
    order = protobuf('syntax = "proto3"; import "customer.proto"; message Order { crm.Customer buyer = 1; }',
                     [("customer.proto", "PROTOBUF", CUSTOMER)])
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("customer.proto", customer.formatted("serialized")))
    file = pool.Add(_str_to_proto("default", order.formatted("serialized")))
    assert file.message_types_by_name["Order"].fields_by_name["buyer"].message_type.full_name == "crm.Customer"


# --- compatibility: which changes a reader survives ---


def test_the_same_schema_reads_itself():
    assert protobuf(PROTO3).reader_problems(protobuf(PROTO3)) == []
    assert protobuf(PROTO2).reader_problems(protobuf(PROTO2)) == []


def test_a_removed_message_is_a_problem_and_an_added_one_is_not():
    assert problems("message A {}", "message A {} message B {}") == ["MESSAGE_REMOVED #/B"]
    assert problems("message A {} message B {}", "message A {}") == []


def test_fields_added_or_removed_by_number_are_no_problem():
    assert problems("message A { int32 x = 1; }", "message A { int32 x = 1; string y = 2; }") == []
    assert problems("message A { int32 x = 1; string y = 2; }", "message A { int32 x = 1; }") == []
    assert ("FIELD_REMOVED", "#/A/2") in kinds("message A { int32 x = 1; }",
                                               "message A { int32 x = 1; string y = 2; }")


def test_a_field_renamed_is_no_problem():
    assert kinds("message A { int32 count = 1; }", "message A { int32 total = 1; }") == \
        [("FIELD_NAME_CHANGED", "#/A/1")]
    assert problems("message A { int32 count = 1; }", "message A { int32 total = 1; }") == []


@pytest.mark.parametrize("old, new", [
    ("int32", "int64"), ("int32", "uint32"), ("uint64", "int64"), ("int32", "bool"), ("sint32", "sint64"),
    ("fixed32", "sfixed32"), ("fixed64", "sfixed64"), ("string", "bytes"), ("bytes", "string"),
])
def test_a_scalar_may_change_within_its_wire_group(old, new):
    assert problems(f"message MyRecord {{ {new} f = 2; }}", f"message MyRecord {{ {old} f = 2; }}") == []


@pytest.mark.parametrize("old, new", [
    ("int32", "sint32"), ("int64", "string"), ("float", "double"), ("fixed32", "int32"),
    ("fixed32", "fixed64"), ("sint64", "sfixed64"),
])
def test_a_scalar_may_not_change_to_another_wire_group(old, new):
    assert problems(f"message MyRecord {{ {new} f = 2; }}", f"message MyRecord {{ {old} f = 2; }}") == \
        ["FIELD_SCALAR_KIND_CHANGED #/MyRecord/2"]


def test_an_enum_reads_as_an_integer_and_not_as_a_string():
    enum = "enum E { ZERO = 0; ONE = 1; }"
    assert problems(f"message A {{ E e = 1; }} {enum}", f"message A {{ int32 e = 1; }} {enum}") == []
    assert problems(f"message A {{ int64 e = 1; }} {enum}", f"message A {{ E e = 1; }} {enum}") == []
    assert problems(f"message A {{ string e = 1; }} {enum}", f"message A {{ E e = 1; }} {enum}") == \
        ["FIELD_SCALAR_KIND_CHANGED #/A/1"]


def test_a_field_may_not_change_between_scalar_message_and_map():
    inner = "message B { int32 x = 1; }"
    assert problems(f"message A {{ B f = 1; }} {inner}", f"message A {{ int32 f = 1; }} {inner}") == \
        ["FIELD_KIND_CHANGED #/A/1"]
    assert problems(f"message A {{ map<string, int32> f = 1; }} {inner}", f"message A {{ B f = 1; }} {inner}") \
        == ["FIELD_KIND_CHANGED #/A/1"]


def test_a_map_compares_its_key_and_value_types():
    assert problems("message A { map<string, int64> m = 1; }", "message A { map<string, int32> m = 1; }") == []
    assert problems("message A { map<string, string> m = 1; }", "message A { map<string, int32> m = 1; }") == \
        ["FIELD_SCALAR_KIND_CHANGED #/A/1"]


def test_a_message_field_may_not_change_to_a_differently_named_type():
    both = "message B { int32 x = 1; } message C { int32 x = 1; }"
    assert problems(f"message A {{ C f = 1; }} {both}", f"message A {{ B f = 1; }} {both}") == \
        ["FIELD_NAMED_TYPE_CHANGED #/A/1"]


def test_numeric_labels_are_fixed_and_string_labels_are_not():
    assert problems("message A { repeated int32 x = 1; }", "message A { optional int32 x = 1; }", "proto2") == \
        ["FIELD_NUMERIC_LABEL_CHANGED #/A/1"]
    assert problems("message A { repeated string s = 1; }", "message A { optional string s = 1; }",
                    "proto2") == []
    assert ("FIELD_STRING_OR_BYTES_LABEL_CHANGED", "#/A/1") in kinds(
        "message A { repeated string s = 1; }", "message A { optional string s = 1; }", "proto2")


def test_a_plain_proto3_field_has_no_label_to_compare():
    # As Confluent reads proto3: a field without a label has none, so no label change is seen
    assert problems("message A { repeated int32 x = 1; }", "message A { int32 x = 1; }") == []
    assert problems("message A { repeated int32 x = 1; }", "message A { optional int32 x = 1; }") == \
        ["FIELD_NUMERIC_LABEL_CHANGED #/A/1"]


def test_required_fields_may_be_neither_added_nor_removed():
    base = "message A { required int32 x = 1; }"
    more = "message A { required int32 x = 1; required int32 y = 2; }"
    assert problems(more, base, "proto2") == ["REQUIRED_FIELD_ADDED #/A/2"]
    assert problems(base, more, "proto2") == ["REQUIRED_FIELD_REMOVED #/A/2"]
    assert problems("message A { required int32 x = 1; optional int32 y = 2; }", base, "proto2") == []


def test_a_field_moved_alone_into_a_new_oneof_is_no_problem():
    assert problems("message A { oneof o { int32 x = 1; } }", "message A { int32 x = 1; }") == []


def test_several_fields_moved_into_one_oneof_are_a_problem():
    assert problems("message A { oneof o { int32 x = 1; string y = 2; } }",
                    "message A { int32 x = 1; string y = 2; }") == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF #/A/o"]


def test_a_field_moved_into_an_existing_oneof_is_a_problem():
    assert problems("message A { oneof o { int32 x = 1; string y = 2; } }",
                    "message A { oneof o { int32 x = 1; } string y = 2; }") == ["FIELD_MOVED_TO_EXISTING_ONEOF #/A/o"]


def test_a_field_moved_out_of_its_oneof_is_no_problem():
    assert kinds("message A { int32 x = 1; }", "message A { oneof o { int32 x = 1; } }") == \
        [("ONEOF_REMOVED", "#/A/o"), ("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", "#/A/1")]
    assert problems("message A { int32 x = 1; }", "message A { oneof o { int32 x = 1; } }") == []


def test_a_oneof_member_removed_while_the_oneof_lives_on_is_a_problem():
    assert problems("message A { oneof o { int32 x = 1; } }",
                    "message A { oneof o { int32 x = 1; string y = 2; } }") == ["ONEOF_FIELD_REMOVED #/A/o/2"]


def test_a_whole_oneof_removed_or_a_member_added_is_no_problem():
    assert problems("message A { int32 z = 3; }", "message A { oneof o { int32 x = 1; string y = 2; } int32 z = 3; }") \
        == []
    assert problems("message A { oneof o { int32 x = 1; string y = 2; } }", "message A { oneof o { int32 x = 1; } }") \
        == []


def test_a_change_inside_a_oneof_is_reported_at_the_oneof():
    assert problems("message A { oneof o { string x = 1; } }", "message A { oneof o { int32 x = 1; } }") == \
        ["FIELD_SCALAR_KIND_CHANGED #/A/o/1"]


def test_enum_constants_may_be_added_and_removed():
    assert problems("enum E { A = 0; B = 1; C = 2; }", "enum E { A = 0; B = 1; }") == []
    assert problems("enum E { A = 0; }", "enum E { A = 0; B = 1; }") == []
    assert kinds("enum E { A = 0; C = 1; }", "enum E { A = 0; B = 1; }") == [("ENUM_CONST_CHANGED", "#/E/1")]


def test_messages_reordered_is_no_problem():
    assert kinds("message B {} message A {}", "message A {} message B {}") == \
        [("MESSAGE_MOVED", "#/A"), ("MESSAGE_MOVED", "#/B")]
    assert problems("message B {} message A {}", "message A {} message B {}") == []


def test_a_changed_package_is_a_problem():
    reader, writer = message("message A {}", package="two"), message("message A {}", package="one")
    assert reader.reader_problems(writer) == ["PACKAGE_CHANGED #/"]


def test_syntax_may_change():
    proto2 = message("message A { optional int32 x = 1; }", "proto2")
    proto3 = message("message A { int32 x = 1; }", "proto3")
    assert proto3.reader_problems(proto2) == [] and proto2.reader_problems(proto3) == []


def test_nested_messages_are_compared_at_their_path():
    assert problems("message Outer { message Inner { string x = 1; } Inner inner = 1; }",
                    "message Outer { message Inner { int32 x = 1; } Inner inner = 1; }") == \
        ["FIELD_SCALAR_KIND_CHANGED #/Outer/Inner/1"]


def test_a_referenced_message_is_compared_through_the_field_that_uses_it():
    def order(customer: str) -> ProtobufSchema:
        return protobuf('syntax = "proto3"; import "customer.proto"; message Order { crm.Customer buyer = 1; }',
                        [("customer.proto", "PROTOBUF", customer)])
    changed = CUSTOMER.replace("string name = 1;", "int32 name = 1;")
    assert order(changed).reader_problems(order(CUSTOMER)) == \
        ["FIELD_SCALAR_KIND_CHANGED #/Customer/1", "FIELD_NAMED_TYPE_CHANGED #/Order/1"]
    assert order(CUSTOMER.replace("}", "int32 age = 2; }")).reader_problems(order(CUSTOMER)) == []


def test_a_recursive_message_compares_without_end():
    tree = "message Node { repeated Node children = 1; string label = 2; }"
    assert problems(tree, tree) == []
    assert problems(tree.replace("string label", "int32 label"), tree) == ["FIELD_SCALAR_KIND_CHANGED #/Node/2"]


def test_a_schema_of_another_type_cannot_be_read():
    class AvroWriter:
        schema_type = "AVRO"
    assert protobuf(PROTO3).reader_problems(AvroWriter()) != []
