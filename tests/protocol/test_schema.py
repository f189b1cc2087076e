"""The generic codec: how a schema table becomes bytes, version by version."""

import pickle

import pytest

from mmlog.protocol.errors import EncodeError, ProtocolError, UnsupportedVersionError
from mmlog.protocol.primitives import PartsWriter
from mmlog.protocol.schema import Field, Message, parts_size
from mmlog.protocol.structs import Placeholder, parse_versions

# A made-up message exercising each feature once: a field added in v1, one
# removed after v1, nullability from v1, a struct array, flexible from v2 and a
# tagged field.
EXAMPLE = Message("ExampleRequest", api_key=1000, versions="0-2", flexible="2+", fields=[
    Field("name", "string", "0+"),
    Field("added", "int32", "1+", default=-1),
    Field("removed", "int16", "0-1"),
    Field("note", "string", "1+", nullable="1+", default=None),
    Field("items", "[]ExampleItem", "0+", fields=[
        Field("id", "int32", "0+"),
        Field("data", "bytes", "0+"),
    ]),
    Field("ids", "[]int64", "0+", nullable="1+"),
    Field("extra", "int32", "2+", tag=0, tagged="2+", default=-1),
])

VALUE = EXAMPLE(name="n", added=5, removed=2, note="hi",
                items=[{"id": 1, "data": b"ab"}], ids=[9], extra=4)

# (version, exact bytes of VALUE)
GOLDEN = [
    (0, "0001" "6e"  # name
        "0002"  # removed
        "00000001" "00000001" "00000002" "6162"  # items: count, id, data
        "00000001" "0000000000000009"),  # ids
    (1, "0001" "6e" "00000005" "0002" "0002" "6869"
        "00000001" "00000001" "00000002" "6162"
        "00000001" "0000000000000009"),
    (2, "02" "6e"  # compact name
        "00000005"  # added; removed is gone; note compact:
        "03" "6869"
        "02" "00000001" "03" "6162" "00"  # compact array, item with its own tag section
        "02" "0000000000000009"
        "01" "00" "04" "00000004"),  # tag section: one field, tag 0, 4 bytes
]


@pytest.mark.parametrize("version, hex_bytes", GOLDEN)
def test_encoding_follows_the_version(version, hex_bytes):
    assert EXAMPLE.encode(VALUE, version).hex() == hex_bytes


@pytest.mark.parametrize("version, hex_bytes", GOLDEN)
def test_decoding_follows_the_version(version, hex_bytes):
    decoded = EXAMPLE.decode(bytes.fromhex(hex_bytes), version)
    assert decoded.name == "n"
    assert decoded.items[0].id == 1 and decoded.items[0].data == b"ab"
    assert decoded.ids == [9]
    assert (decoded.added, decoded.removed) == ((-1, 2), (5, 2), (5, 0))[version]
    assert decoded.note == (None, "hi", "hi")[version]
    assert decoded.extra == (-1, -1, 4)[version]


def test_fields_absent_from_a_version_get_their_defaults_on_decode():
    decoded = EXAMPLE.decode(bytes.fromhex(GOLDEN[0][1]), 0)
    assert decoded.added == -1  # explicit default
    assert decoded.note is None  # default null


def test_constructor_fills_defaults_and_rejects_unknown_fields():
    value = EXAMPLE(name="x")
    assert (value.added, value.removed, value.items, value.ids, value.extra) == (-1, 0, [], [], -1)
    assert EXAMPLE().items is not EXAMPLE().items  # fresh lists
    with pytest.raises(TypeError, match="nmae"):
        EXAMPLE(nmae="x")


def test_encode_takes_dicts_and_plain_objects():
    as_dict = {"name": "n", "added": 5, "removed": 2, "note": "hi",
               "items": [{"id": 1, "data": b"ab"}], "ids": [9], "extra": 4}

    class Plain:
        pass

    plain = Plain()
    plain.__dict__.update(as_dict)
    for value in (as_dict, plain):
        assert EXAMPLE.encode(value, 2).hex() == GOLDEN[2][1]


def test_nested_struct_classes_hang_off_their_parent():
    item = EXAMPLE.cls.ExampleItem(id=3)
    assert item.data == b""
    assert EXAMPLE(items=[item]).items[0].id == 3


def test_null_where_the_version_does_not_allow_it():
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(ids=None), 0)
    assert EXAMPLE.encode(EXAMPLE(ids=None), 1).endswith(b"\xff\xff\xff\xff")
    with pytest.raises(ProtocolError):
        EXAMPLE.decode(bytes.fromhex("0000" "0000" "00000000" "ffffffff"), 0)


def test_tagged_field_at_its_default_is_not_written():
    encoded = EXAMPLE.encode(EXAMPLE(extra=-1), 2)
    assert encoded.endswith(b"\x00")  # empty tag section
    assert EXAMPLE.decode(encoded, 2).extra == -1


V2_PREFIX = "02" "6e" "00000005" "03" "6869" "01" "01"  # name, added, note, no items, no ids


def test_unknown_tags_are_skipped():
    tags = "02" "00" "04" "00000004" "07" "02" "abcd"  # tag 0 (extra), tag 7 (unknown)
    assert EXAMPLE.decode(bytes.fromhex(V2_PREFIX + tags), 2).extra == 4


def test_tags_must_ascend():
    tags = "02" "07" "02" "abcd" "00" "04" "00000004"
    with pytest.raises(ProtocolError):
        EXAMPLE.decode(bytes.fromhex(V2_PREFIX + tags), 2)


def test_a_tagged_field_must_fill_its_declared_size():
    body = bytes.fromhex(V2_PREFIX + "01" "00" "05" "0000000400")
    with pytest.raises(ProtocolError):
        EXAMPLE.decode(body, 2)


def test_versions_outside_the_range_are_refused():
    with pytest.raises(UnsupportedVersionError):
        EXAMPLE.encode(VALUE, 3)
    with pytest.raises(UnsupportedVersionError):
        EXAMPLE.decode(b"", 3)


def test_codecs_are_compiled_once_per_version():
    assert EXAMPLE.codec(1) is EXAMPLE.codec(1)
    assert EXAMPLE.codec(1) is not EXAMPLE.codec(2)


def test_decode_from_an_offset_returns_the_end():
    data = memoryview(b"\xaa\xbb" + bytes.fromhex(GOLDEN[0][1]) + b"\xcc")
    value, end = EXAMPLE.decode_from(data, 2, 0)
    assert value.name == "n" and end == len(data) - 1


@pytest.mark.parametrize("spec, expected", [
    ("0+", (0, 0x7FFF)), ("3-5", (3, 5)), ("2", (2, 2)), ("none", None), ((1, None), (1, 0x7FFF)),
])
def test_version_ranges_use_kafka_notation(spec, expected):
    assert parse_versions(spec) == expected


def test_invalid_tables_are_refused():
    with pytest.raises(ValueError):
        Field("x", "int32", "0+", nullable="0+")
    with pytest.raises(ValueError):
        Field("x", "int32", "0+", fields=[Field("y", "int8", "0+")])
    with pytest.raises(ValueError):
        Message("Dup", api_key=1, versions="0", flexible="none",
                fields=[Field("x", "int8", "0+"), Field("x", "int8", "0+")])


# --- parts: encoding around bytes the caller sends itself -----------------------------

def test_placeholders_split_the_output_into_parts():
    value = EXAMPLE(name="n", items=[{"id": 1, "data": Placeholder(1000, "file range A")},
                                     {"id": 2, "data": b"xy"},
                                     {"id": 3, "data": Placeholder(5, "file range B")}])
    parts = EXAMPLE.encode_parts(value, 0)
    assert [type(part) for part in parts] == [bytearray, Placeholder, bytearray, Placeholder,
                                             bytearray]
    assert parts[0].hex() == "0001" "6e" "0000" "00000003" "00000001" "000003e8"
    assert parts[1].payload == "file range A"
    assert parts[2].hex() == "00000002" "00000002" "7879" "00000003" "00000005"
    assert parts[4].hex() == "00000000"  # ids
    assert parts_size(parts) == sum(map(len, parts)) == len(parts[0]) + 1000 + len(parts[2]) + 5 + 4


def test_parts_with_real_bytes_equal_the_plain_encoding():
    blob_a, blob_b = b"A" * 1000, b"B" * 5
    with_blobs = EXAMPLE(name="n", items=[{"id": 1, "data": blob_a}, {"id": 3, "data": blob_b}])
    placeheld = EXAMPLE(name="n", items=[{"id": 1, "data": Placeholder(1000, blob_a)},
                                         {"id": 3, "data": Placeholder(5, blob_b)}])
    spliced = b"".join(part.payload if isinstance(part, Placeholder) else bytes(part)
                       for part in EXAMPLE.encode_parts(placeheld, 2))
    assert spliced == EXAMPLE.encode(with_blobs, 2)


def test_without_placeholders_there_is_one_part():
    assert EXAMPLE.encode_parts(VALUE, 1) == [EXAMPLE.encode(VALUE, 1)]


def test_a_zero_copy_parts_writer_leaves_big_byte_fields_where_they_are():
    small, big = b"s" * 10, bytearray(b"B" * 2000)
    value = EXAMPLE(name="n", items=[{"id": 1, "data": small}, {"id": 2, "data": big},
                                     {"id": 3, "data": memoryview(big)}])
    parts = EXAMPLE.encode_parts(value, 1, PartsWriter(zero_copy=1000))
    assert [type(p) for p in parts] == [bytearray, bytearray, bytearray, memoryview, bytearray]
    assert parts[1] is big and parts[3].obj is big  # the caller's buffers, not copies
    assert b"".join(bytes(p) for p in parts) == bytes(EXAMPLE.encode(value, 1))


def test_inlined_fields_fail_like_the_primitives():
    """Strings, bytes and struct arrays are written out in the generated code; bad values still raise
    the primitives' errors (the codec calls them when the inlined code finds something wrong)."""
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(name=None), 0)  # a null in a non-nullable string
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(name=b"bytes, not str"), 0)
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(name="x" * 40000), 0)
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(items=None), 0)
    with pytest.raises(ProtocolError, match="not UTF-8"):
        EXAMPLE.decode(bytes.fromhex("0002" "ffff"), 0)  # a name that is not UTF-8
    with pytest.raises(ProtocolError, match="length -1"):
        EXAMPLE.decode(bytes.fromhex("ffff"), 0)  # null where v0 allows none


def test_placeholders_need_encode_parts():
    with pytest.raises(EncodeError):
        EXAMPLE.encode(EXAMPLE(items=[{"id": 1, "data": Placeholder(3)}]), 0)


def test_misspelt_dict_keys_fail_on_encode():
    with pytest.raises(TypeError, match="nmae"):
        EXAMPLE.encode({"nmae": "x"}, 0)


def test_values_pickle_with_byte_fields_as_bytes():
    """A processor hands decoded requests to the control plane as pickles."""
    decoded = EXAMPLE.decode(bytes.fromhex(GOLDEN[1][1]), 1)
    restored = pickle.loads(pickle.dumps(decoded))
    assert restored == decoded
    assert type(restored.items[0]) is EXAMPLE.cls.ExampleItem
    assert type(restored.items[0].data) is bytes
    assert type(restored.items[0]).__qualname__ == "ExampleRequest.ExampleItem"
