"""Record batch v2 codec: golden bytes, varints, CRC-32C, validation, round trips, kafka-python interop."""

from __future__ import annotations

import gzip
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from mmlog.errors import CorruptMessage, InvalidRecord
from mmlog.protocol import records as rec

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# ---------------------------------------------------------------- golden tables

VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]

# Two records (offsets 0, 1; timestamps 1000, 1005): key b"k", value b"v", header ("h", b"x");
# then a null key and null value with no headers. Byte for byte what kafka-python builds.
GOLDEN_BATCH = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "00000045"  # batchLength 69
    "00000000"  # partitionLeaderEpoch 0
    "02"  # magic
    "bc161909"  # CRC-32C
    "0000"  # attributes
    "00000001"  # lastOffsetDelta 1
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ed"  # maxTimestamp 1005
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordsCount 2
    "18" "00" "00" "00" "02" "6b" "02" "76" "02" "02" "68" "02" "78"  # len 12, attrs, ts+0, off 0, k, v, 1 header h=x
    "0c" "00" "0a" "02" "01" "01" "00"  # len 6, attrs, ts+5, off 1, null key, null value, 0 headers
)
GOLDEN_RECORDS = [
    rec.Record(b"v", b"k", [("h", b"x")], 1000),
    rec.Record(None, None, [], 1005),
]


@pytest.mark.parametrize(("value", "hex_bytes"), VARINTS)
def test_zigzag_varint_encodes_to_the_golden_bytes(value, hex_bytes):
    out = bytearray()
    rec.write_varint(out, value)
    assert out.hex() == hex_bytes


@pytest.mark.parametrize(("value", "hex_bytes"), VARINTS)
def test_zigzag_varint_decodes_from_the_golden_bytes(value, hex_bytes):
    data = bytes.fromhex(hex_bytes) + b"\xaa"
    assert rec.read_varint(data, 0) == (value, len(data) - 1)


def test_zigzag_maps_small_magnitudes_to_small_codes():
    assert [rec.zigzag_encode(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert [rec.zigzag_decode(u) for u in (0, 1, 2, 3, 4)] == [0, -1, 1, -2, 2]


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varint_round_trips_every_int64(n):
    out = bytearray()
    rec.write_varint(out, n)
    assert len(out) <= 10
    assert rec.read_varint(out, 0) == (n, len(out))


def test_a_truncated_varint_is_corrupt():
    with pytest.raises(CorruptMessage):
        rec.read_varint(b"\x80\x80", 0)


def test_a_varint_longer_than_ten_bytes_is_corrupt():
    with pytest.raises(CorruptMessage):
        rec.read_varint(b"\xff" * 11 + b"\x01", 0)


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283


# ---------------------------------------------------------------- building


def test_build_batch_produces_the_golden_bytes():
    assert bytes(rec.build_batch(GOLDEN_RECORDS)) == GOLDEN_BATCH


def test_golden_batch_header_fields():
    h = rec.read_header(GOLDEN_BATCH)
    assert h == rec.BatchHeader(
        base_offset=0, batch_length=69, partition_leader_epoch=0, magic=2, crc=0xBC161909, attributes=0,
        last_offset_delta=1, base_timestamp=1000, max_timestamp=1005, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, records_count=2,
    )
    assert (h.size, h.last_offset, h.next_offset) == (len(GOLDEN_BATCH), 1, 2)
    assert (h.compression, h.timestamp_type, h.is_control) == (0, 0, False)


def test_crc_covers_attributes_to_the_end():
    batch = rec.build_batch(GOLDEN_RECORDS)
    (stored,) = struct.unpack_from(">I", batch, rec.CRC_OFFSET)
    assert stored == crc32c(bytes(batch[rec.CRC_START :]))


def test_golden_batch_decodes_to_its_records():
    assert rec.decode_records(GOLDEN_BATCH) == [
        rec.Record(b"v", b"k", [("h", b"x")], 1000, 0),
        rec.Record(None, None, [], 1005, 1),
    ]


def test_null_and_empty_keys_and_values_stay_distinct():
    batch = rec.build_batch([(None, b""), (b"", None), (b"", b""), (None, None)])
    assert [(r.key, r.value) for r in rec.decode_records(batch)] == [(None, b""), (b"", None), (b"", b""), (None, None)]


def test_headers_keep_order_duplicates_and_null_values():
    headers = [("a", b"1"), ("a", b"2"), ("b", None), ("", b"")]
    (r,) = rec.decode_records(rec.build_batch([(b"k", b"v", headers)]))
    assert r.headers == headers


def test_records_without_timestamp_take_the_base_timestamp():
    batch = rec.build_batch([(b"k", b"v"), (b"k2", b"v2")], base_timestamp=12345)
    assert [r.timestamp for r in rec.decode_records(batch)] == [12345, 12345]


def test_max_timestamp_is_the_largest_even_when_records_go_back_in_time():
    recs = [rec.Record(b"a", timestamp=500), rec.Record(b"b", timestamp=900), rec.Record(b"c", timestamp=100)]
    batch = rec.build_batch(recs)
    h = rec.read_header(batch)
    assert (h.base_timestamp, h.max_timestamp) == (100, 900)
    assert [r.timestamp for r in rec.decode_records(batch)] == [500, 900, 100]


def test_producer_fields_and_leader_epoch_are_written():
    batch = rec.build_batch([(None, b"v")], producer_id=77, producer_epoch=3, base_sequence=41,
                            partition_leader_epoch=5)
    h = rec.validate_batch(batch)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (77, 3, 41, 5)


def test_an_empty_batch_cannot_be_built():
    with pytest.raises(ValueError):
        rec.build_batch([])


def test_gzip_batch_round_trips():
    recs = [rec.Record(b"value %d" % i, b"k", [], 1000 + i) for i in range(20)]
    batch = rec.build_batch(recs, compression=1)
    h = rec.validate_batch(batch)
    assert h.compression == 1 and h.records_count == 20
    gzip.decompress(bytes(batch[rec.HEADER_SIZE :]))  # one gzip stream after the header
    assert [(r.value, r.timestamp, r.offset) for r in rec.decode_records(batch)] == [
        (b"value %d" % i, 1000 + i, i) for i in range(20)
    ]


# ---------------------------------------------------------------- validation


def test_validate_accepts_the_golden_batch():
    assert rec.validate_batch(GOLDEN_BATCH).records_count == 2


def test_validate_detects_a_length_below_the_header():
    batch = bytearray(GOLDEN_BATCH)
    struct.pack_into(">i", batch, rec.BATCH_LENGTH, rec.HEADER_SIZE - rec.LOG_OVERHEAD - 1)
    with pytest.raises(CorruptMessage, match="below the header"):
        rec.validate_batch(batch)


def test_validate_detects_a_length_past_the_buffer():
    batch = bytearray(GOLDEN_BATCH)
    struct.pack_into(">i", batch, rec.BATCH_LENGTH, len(batch))
    with pytest.raises(CorruptMessage, match="runs past"):
        rec.validate_batch(batch)


@pytest.mark.parametrize("cut", [0, 5, 11, 12, 60, len(GOLDEN_BATCH) - 1])
def test_validate_detects_a_truncated_batch(cut):
    with pytest.raises(CorruptMessage):
        rec.validate_batch(GOLDEN_BATCH[:cut])


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_validate_detects_a_wrong_magic(magic):
    batch = bytearray(GOLDEN_BATCH)
    batch[rec.MAGIC_OFFSET] = magic
    with pytest.raises(CorruptMessage, match="magic"):
        rec.validate_batch(batch)


@pytest.mark.parametrize("position", range(rec.CRC_OFFSET, len(GOLDEN_BATCH)))
def test_validate_detects_any_flipped_byte_from_the_crc_on(position):
    batch = bytearray(GOLDEN_BATCH)
    batch[position] ^= 0x40
    with pytest.raises(CorruptMessage):
        rec.validate_batch(batch)


@pytest.mark.parametrize("position", [*range(0, 8), *range(12, 16)])
def test_base_offset_and_leader_epoch_lie_outside_the_crc(position):
    batch = bytearray(GOLDEN_BATCH)
    batch[position] ^= 0x40
    rec.validate_batch(batch)


def test_validate_rejects_a_count_that_disagrees_with_the_last_offset_delta():
    body = bytearray()
    rec.encode_record(body, 0, 0, None, b"v")
    batch = rec._assemble(
        body, base_offset=0, partition_leader_epoch=0, attributes=0, last_offset_delta=3, base_timestamp=0,
        max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, records_count=1,
    )
    with pytest.raises(InvalidRecord):
        rec.validate_batch(batch)


def test_validate_batches_walks_back_to_back_batches():
    a = rec.build_batch([(None, b"a")])
    b = rec.build_batch([(None, b"b"), (None, b"c")])
    headers = rec.validate_batches(a + b)
    assert [h.records_count for h in headers] == [1, 2]


def test_validate_batches_rejects_an_empty_buffer_and_a_partial_tail():
    with pytest.raises(CorruptMessage):
        rec.validate_batches(b"")
    with pytest.raises(CorruptMessage):
        rec.validate_batches(GOLDEN_BATCH + GOLDEN_BATCH[:30])


def test_validate_whole_batches_stops_before_a_partial_tail_and_checks_the_whole_ones():
    a = rec.build_batch([(None, b"a")])
    b = rec.build_batch([(None, b"b"), (None, b"c")])
    for tail in (b"", b[:5], b[:30], b[:-1]):
        headers, end = rec.validate_whole_batches(a + b + tail)
        assert [h.records_count for h in headers] == [1, 2] and end == len(a) + len(b)
    assert rec.validate_whole_batches(b"") == ([], 0)
    assert rec.validate_whole_batches(a[:-1]) == ([], 0)
    bad = bytearray(a + b)
    bad[-1] ^= 1
    with pytest.raises(CorruptMessage):
        rec.validate_whole_batches(bad)


def test_validate_batch_at_a_position_inside_a_larger_buffer():
    buf = b"\x00" * 7 + GOLDEN_BATCH + b"\xff" * 3
    assert rec.validate_batch(buf, 7).records_count == 2


# ---------------------------------------------------------------- patching and walking


@given(st.integers(0, INT64_MAX))
def test_set_base_offset_keeps_the_crc_valid(offset):
    batch = bytearray(GOLDEN_BATCH)
    rec.set_base_offset(batch, offset)
    h = rec.validate_batch(batch)
    assert (h.base_offset, h.crc) == (offset, 0xBC161909)
    assert [r.offset for r in rec.decode_records(batch)] == [offset, offset + 1]


def test_set_base_offset_patches_the_batch_at_a_position():
    buf = bytearray(GOLDEN_BATCH + GOLDEN_BATCH)
    rec.set_base_offset(buf, 2, len(GOLDEN_BATCH))
    assert [h.base_offset for h in rec.validate_batches(buf)] == [0, 2]


def test_iter_batches_stops_at_a_partial_tail():
    buf = GOLDEN_BATCH + GOLDEN_BATCH + GOLDEN_BATCH[:-1]
    assert [pos for pos, _ in rec.iter_batches(buf)] == [0, len(GOLDEN_BATCH)]


def test_iter_batches_stops_at_a_length_below_the_header():
    buf = bytearray(GOLDEN_BATCH + GOLDEN_BATCH)
    struct.pack_into(">i", buf, len(GOLDEN_BATCH) + rec.BATCH_LENGTH, 3)
    assert [pos for pos, _ in rec.iter_batches(buf)] == [0]


# ---------------------------------------------------------------- round trips

header_st = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16)))
record_st = st.builds(
    rec.Record,
    value=st.one_of(st.none(), st.binary(max_size=200)),
    key=st.one_of(st.none(), st.binary(max_size=30)),
    headers=st.lists(header_st, max_size=3),
    timestamp=st.integers(0, 2**41),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=12), st.integers(0, 2**40), st.sampled_from([0, 1]))
def test_decode_records_round_trips_build_batch(recs, base_offset, compression):
    batch = rec.build_batch(recs, base_offset=base_offset, compression=compression)
    h = rec.validate_batch(batch)
    assert h.records_count == len(recs)
    assert h.max_timestamp == max(r.timestamp for r in recs)
    decoded = rec.decode_records(batch)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in recs
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(recs)))


# ---------------------------------------------------------------- kafka-python interop


def _kafka_python_batch(recs: list[rec.Record], compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )
    for i, r in enumerate(recs):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
    return bytes(builder.build())


def test_kafka_python_builds_the_same_bytes_as_we_do():
    assert _kafka_python_batch(GOLDEN_RECORDS) == GOLDEN_BATCH


@settings(max_examples=100, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=8), st.sampled_from([0, 1]))
def test_a_kafka_python_batch_validates_and_decodes_with_ours(recs, compression):
    data = bytearray(_kafka_python_batch(recs, compression))
    h = rec.validate_batch(data)
    assert h.records_count == len(recs)
    assert h.compression in (0, compression)  # kafka-python sends uncompressed when gzip does not help
    rec.set_base_offset(data, 1000)
    rec.validate_batch(data)
    assert [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in rec.decode_records(data)] == [
        (r.key, r.value, r.headers, r.timestamp, 1000 + i) for i, r in enumerate(recs)
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=8), st.integers(0, 2**40), st.sampled_from([0, 1]))
def test_a_batch_we_build_is_read_by_kafka_python_with_a_valid_crc(recs, base_offset, compression):
    batch = rec.build_batch(recs, compression=compression)
    rec.set_base_offset(batch, base_offset)
    memory = MemoryRecords(bytes(batch) + bytes(batch[:20]))  # a partial tail, as a fetch may carry
    read = memory.next_batch()
    assert isinstance(read, DefaultRecordBatch)
    assert read.validate_crc()
    assert (read.base_offset, read.compression_type) == (base_offset, compression)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in read] == [
        (base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)
    ]
    assert memory.next_batch() is None
