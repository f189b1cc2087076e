"""Primitive types: exact bytes for each value, round-trips, and truncation."""

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmlog.protocol import primitives as p
from mmlog.protocol.errors import EncodeError, ProtocolError, TruncatedError

# (type, value, exact bytes)
GOLDEN = [
    ("int8", 0, "00"),
    ("int8", -1, "ff"),
    ("int8", 127, "7f"),
    ("int8", -128, "80"),
    ("int16", 1, "0001"),
    ("int16", -1, "ffff"),
    ("int16", 32767, "7fff"),
    ("int16", -32768, "8000"),
    ("uint16", 65535, "ffff"),
    ("int32", 1, "00000001"),
    ("int32", -1, "ffffffff"),
    ("int32", 2**31 - 1, "7fffffff"),
    ("int32", -(2**31), "80000000"),
    ("uint32", 2**32 - 1, "ffffffff"),
    ("uint32", 0xE3069283, "e3069283"),
    ("int64", 1, "0000000000000001"),
    ("int64", -1, "ffffffffffffffff"),
    ("int64", 2**63 - 1, "7fffffffffffffff"),
    ("int64", -(2**63), "8000000000000000"),
    ("float64", 1.5, "3ff8000000000000"),
    ("float64", -0.0, "8000000000000000"),
    ("bool", False, "00"),
    ("bool", True, "01"),
    ("uuid", uuid.UUID(int=0), "00" * 16),
    ("uuid", uuid.UUID("0123456789abcdef0123456789abcdef"), "0123456789abcdef0123456789abcdef"),
    # unsigned varints: 7 bits per byte, least significant group first
    ("uvarint", 0, "00"),
    ("uvarint", 1, "01"),
    ("uvarint", 127, "7f"),
    ("uvarint", 128, "8001"),
    ("uvarint", 300, "ac02"),
    ("uvarint", 16383, "ff7f"),
    ("uvarint", 16384, "808001"),
    ("uvarint", 2**21 - 1, "ffff7f"),
    ("uvarint", 2**28, "8080808001"),
    ("uvarint", 2**31 - 1, "ffffffff07"),
    ("uvarint", 2**32 - 1, "ffffffff0f"),
    # string: int16 length; nullable: -1 is null
    ("string", "", "0000"),
    ("string", "abc", "0003616263"),
    ("string", "é", "0002c3a9"),
    ("nullable_string", None, "ffff"),
    ("nullable_string", "", "0000"),
    ("nullable_string", "a", "000161"),
    # compact string: uvarint N+1; 0 is null
    ("compact_string", "", "01"),
    ("compact_string", "abc", "04616263"),
    ("compact_nullable_string", None, "00"),
    ("compact_nullable_string", "", "01"),
    ("compact_string", "x" * 127, "8001" + "78" * 127),
    # bytes: int32 length
    ("bytes", b"", "00000000"),
    ("bytes", b"\x01\x02", "000000020102"),
    ("nullable_bytes", None, "ffffffff"),
    ("compact_bytes", b"", "01"),
    ("compact_bytes", b"\xff", "02ff"),
    ("compact_nullable_bytes", None, "00"),
]


def _codec(type_name):
    return getattr(p, f"read_{type_name}"), getattr(p, f"write_{type_name}")


@pytest.mark.parametrize("type_name, value, hex_bytes", GOLDEN)
def test_golden_encoding(type_name, value, hex_bytes):
    _, write = _codec(type_name)
    out = bytearray()
    write(out, value)
    assert out.hex() == hex_bytes


@pytest.mark.parametrize("type_name, value, hex_bytes", GOLDEN)
def test_golden_decoding(type_name, value, hex_bytes):
    read, _ = _codec(type_name)
    data = memoryview(bytes.fromhex(hex_bytes) + b"trailing")
    decoded, end = read(data, 0)
    assert decoded == value
    assert end == len(hex_bytes) // 2


@pytest.mark.parametrize("type_name, value, hex_bytes", GOLDEN)
def test_golden_truncated_input_raises_truncated_error(type_name, value, hex_bytes):
    read, _ = _codec(type_name)
    data = bytes.fromhex(hex_bytes)
    for cut in range(len(data)):
        with pytest.raises(TruncatedError):
            read(memoryview(data[:cut]), 0)


def test_reading_at_an_offset():
    data = memoryview(bytes.fromhex("ffff" "0003616263" "00000001"))
    value, pos = p.read_string(data, 2)
    assert (value, pos) == ("abc", 7)
    assert p.read_int32(data, pos) == (1, 11)


def test_bytes_decode_to_a_slice_of_the_input_not_a_copy():
    data = bytearray(b"\x00\x00\x00\x03abc")
    value, _ = p.read_bytes(memoryview(data), 0)
    assert isinstance(value, memoryview)
    data[4] = ord("X")
    assert bytes(value) == b"Xbc"


@pytest.mark.parametrize("type_name, hex_bytes", [
    ("string", "ffff"),  # null in a non-nullable string
    ("string", "fffe"),  # -2 is never valid
    ("nullable_string", "fffe"),
    ("compact_string", "00"),  # compact null in a non-nullable string
    ("bytes", "ffffffff"),
    ("nullable_bytes", "fffffffe"),
    ("string", "0001ff"),  # not UTF-8
    ("uvarint", "ffffffffff01"),  # six bytes
    ("uvarint", "ffffffff1f"),  # above 2**32-1
])
def test_malformed_input_raises_protocol_error(type_name, hex_bytes):
    read, _ = _codec(type_name)
    with pytest.raises(ProtocolError):
        read(memoryview(bytes.fromhex(hex_bytes)), 0)


@pytest.mark.parametrize("type_name, value", [
    ("int8", 128), ("int16", 32768), ("int32", 2**31), ("int64", -(2**63) - 1),
    ("uint32", -1), ("uvarint", -1), ("uvarint", 2**32),
    ("string", None), ("compact_string", None), ("bytes", None), ("compact_bytes", None),
    ("string", "x" * 32768), ("string", b"bytes"), ("uuid", "not-a-uuid"),
])
def test_unencodable_values_raise_encode_error(type_name, value):
    _, write = _codec(type_name)
    with pytest.raises(EncodeError):
        write(bytearray(), value)


# --- arrays ----------------------------------------------------------------------

ARRAYS = [
    # (compact, nullable, items, exact bytes)
    (False, False, [], "00000000"),
    (False, False, [1, 2], "00000002" "00000001" "00000002"),
    (False, True, None, "ffffffff"),
    (True, False, [], "01"),
    (True, False, [1, 2], "03" "00000001" "00000002"),
    (True, True, None, "00"),
]


@pytest.mark.parametrize("compact, nullable, items, hex_bytes", ARRAYS)
def test_int32_arrays(compact, nullable, items, hex_bytes):
    out = bytearray()
    p.array_writer(p.write_int32, compact=compact, nullable=nullable)(out, items)
    assert out.hex() == hex_bytes
    data = memoryview(out)
    for read in (p.array_reader(p.read_int32, compact=compact, nullable=nullable),
                 p.fixed_array_reader("int32", compact=compact, nullable=nullable)):
        assert read(data, 0) == (items, len(out))


def test_array_of_strings():
    out = bytearray()
    p.array_writer(p.write_compact_string, compact=True, nullable=False)(out, ["a", "bc"])
    assert out.hex() == "03" "0261" "036263"
    read = p.array_reader(p.read_compact_string, compact=True, nullable=False)
    assert read(memoryview(out), 0) == (["a", "bc"], 6)


@pytest.mark.parametrize("hex_bytes, error", [
    ("ffffffff", ProtocolError),  # null where not nullable
    ("fffffffe", ProtocolError),
    ("7fffffff", TruncatedError),  # 2**31-1 items announced, none present
    ("00000002" "00000001", TruncatedError),
])
def test_bad_array_counts(hex_bytes, error):
    data = memoryview(bytes.fromhex(hex_bytes))
    for read in (p.array_reader(p.read_int32, compact=False, nullable=False),
                 p.fixed_array_reader("int32", compact=False, nullable=False)):
        with pytest.raises(error):
            read(data, 0)


def test_null_array_where_not_nullable_cannot_be_encoded():
    with pytest.raises(EncodeError):
        p.array_writer(p.write_int32, compact=False, nullable=False)(bytearray(), None)


# --- tag sections ------------------------------------------------------------------

def test_empty_tag_section_is_one_zero_byte():
    out = bytearray()
    p.write_tag_section(out, {})
    assert out == b"\x00"
    assert p.skip_tag_section(memoryview(out), 0) == 1


def test_tag_section_golden():
    out = bytearray()
    p.write_tag_section(out, {3: b"\x01", 0: b"\xaa\xbb"})
    assert out.hex() == "02" "00" "02" "aabb" "03" "01" "01"  # count, then tags ascending
    fields, end = p.read_tag_section(memoryview(out), 0)
    assert {tag: bytes(v) for tag, v in fields.items()} == {0: b"\xaa\xbb", 3: b"\x01"}
    assert end == len(out) == p.skip_tag_section(memoryview(out), 0)


def test_tags_out_of_order_are_malformed():
    data = bytes.fromhex("02" "03" "00" "01" "00")
    with pytest.raises(ProtocolError):
        p.read_tag_section(memoryview(data), 0)


def test_truncated_tag_section():
    data = bytes.fromhex("01" "00" "05" "aabb")
    with pytest.raises(TruncatedError):
        p.skip_tag_section(memoryview(data), 0)
    with pytest.raises(TruncatedError):
        p.skip_tag_section(memoryview(b""), 0)


# --- parts ----------------------------------------------------------------------------

class Sized:
    def __len__(self):
        return 1000


def test_a_sized_object_becomes_its_own_part():
    out = p.PartsWriter()
    placeholder = Sized()
    p.write_bytes(out, placeholder)
    p.write_int16(out, 7)
    assert out.finish() == [bytearray(b"\x00\x00\x03\xe8"), placeholder, bytearray(b"\x00\x07")]


def test_a_sized_object_cannot_go_into_a_plain_bytearray():
    with pytest.raises(EncodeError):
        p.write_bytes(bytearray(), Sized())


# --- round trips ----------------------------------------------------------------------

ROUND_TRIPS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "uvarint": st.integers(0, 2**32 - 1),
    "string": st.text(max_size=200),
    "nullable_string": st.none() | st.text(max_size=50),
    "compact_string": st.text(max_size=200),
    "compact_nullable_string": st.none() | st.text(max_size=50),
    "bytes": st.binary(max_size=300),
    "nullable_bytes": st.none() | st.binary(max_size=50),
    "compact_bytes": st.binary(max_size=300),
    "compact_nullable_bytes": st.none() | st.binary(max_size=50),
}


@pytest.mark.parametrize("type_name", sorted(ROUND_TRIPS))
def test_round_trip(type_name):
    read, write = _codec(type_name)

    @given(value=ROUND_TRIPS[type_name], prefix=st.binary(max_size=3))
    def check(value, prefix):
        out = bytearray(prefix)
        write(out, value)
        decoded, end = read(memoryview(out), len(prefix))
        assert decoded == value
        assert end == len(out)

    check()


@given(st.lists(st.integers(0, 2**32 - 1), max_size=20))
def test_uvarint_sequences_read_back_in_order(values):
    out = bytearray()
    for v in values:
        p.write_uvarint(out, v)
    pos, data = 0, memoryview(out)
    for v in values:
        got, pos = p.read_uvarint(data, pos)
        assert got == v
    assert pos == len(out)
