"""Where a record's fields lie: the kernel's fast path, its general walk and the Python reference agree on
every record shape (short and long varints, null and long keys and values, headers), and on every cut and
every flipped byte of a batch's records, whichever path a record takes."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from numba import njit

from mmlog.protocol import record_fields as rf
from mmlog.protocol.records import HEADER_SIZE, Record, build_batch

SIZES = (None, 0, 1, 63, 64, 200, 8191, 8192, 20_000)  # one- to three-byte lengths, and null
DELTAS = (0, 1, -1, 63, -64, 64, 8191, -8192, 8192, 1 << 40, -(1 << 62))
HEADERS = ([], [("trace", b"x" * 16)], [("k", None)], [("a", b"b"), ("", b""), ("long", b"v" * 9000)])


@njit(cache=False)
def walk(buf, start, stop, count, general):
    """Each of `count` records from start, through `at` (or the general walk), until one is BAD."""
    out = np.zeros((count, 9), np.int64)
    q = start
    for i in range(count):
        r = rf._at_general(buf, q, stop) if general else rf.at(buf, q, stop)
        for j in range(9):
            out[i, j] = r[j]
        if r[0] < 0:
            return out[:i + 1]
        q = r[0]
    return out[:count]


def walk_py(buf, start: int, stop: int, count: int) -> np.ndarray:
    out, q = [], start
    for _ in range(count):
        out.append(rf.at_py(buf, q, stop))
        if out[-1][0] < 0:
            break
        q = out[-1][0]
    return np.array(out, np.int64).reshape(-1, 9)


def three_ways(data: bytes, start: int, stop: int, count: int) -> np.ndarray:
    buf = np.frombuffer(data[:stop], np.uint8)  # nothing past stop to read
    fast, general, reference = walk(buf, start, stop, count, False), walk(buf, start, stop, count, True), \
        walk_py(buf, start, stop, count)
    assert fast.tolist() == reference.tolist()
    assert general.tolist() == reference.tolist()
    return fast


def records_section(records: list[Record]) -> tuple[bytes, int]:
    batch = bytes(build_batch(records, base_timestamp=1_700_000_000_000))
    return batch, len(records)


def test_every_shape_of_record_is_read_alike_by_the_fast_path_the_general_walk_and_the_reference():
    shapes = [Record(None if v is None else b"v" * v, None if k is None else b"k" * k, h)
              for k, v, h in itertools.product(SIZES, SIZES, HEADERS)]
    batch, count = records_section(shapes)
    fields = three_ways(batch, HEADER_SIZE, len(batch), count)
    assert len(fields) == count and fields[-1, 0] == len(batch)
    assert [(r[3], r[5], r[7]) for r in fields.tolist()] == [
        (-1 if s.key is None else len(s.key), -1 if s.value is None else len(s.value), len(s.headers))
        for s in shapes]


@pytest.mark.parametrize("delta", DELTAS)
def test_timestamp_deltas_short_and_long_come_back_as_written(delta):
    from mmlog.protocol.records import encode_record

    out = bytearray()
    for i, value in enumerate((b"v" * 200, None, b"")):
        encode_record(out, i, delta, b"key", value)
    fields = three_ways(bytes(out), 0, len(out), 3)
    assert fields[:, 1].tolist() == [delta] * 3 and fields[:, 2].tolist() == [0, 1, 2]


def test_a_cut_anywhere_in_the_records_is_found_at_the_same_record_by_every_path():
    records = [Record(b"v" * 200), Record(b"v" * 70, b"key", [("h", b"x")]), Record(None, b"k"), Record(b"v" * 9000)]
    batch, count = records_section(records)
    for stop in range(HEADER_SIZE, len(batch) + 1):
        fields = three_ways(batch, HEADER_SIZE, stop, count)
        assert (fields[-1, 0] == rf.BAD) == (stop < len(batch))


def test_flipped_bytes_in_the_records_are_read_alike_by_every_path():
    rng = random.Random(11)
    records = [Record(b"v" * 200), Record(b"v" * 100, b"key", [("trace", b"x" * 8)]), Record(None),
               Record(b"v" * 300, None, [("k", None)])] * 3
    batch, count = records_section(records)
    for _ in range(3000):
        data = bytearray(batch)
        for _ in range(rng.choice((1, 1, 2, 3))):
            data[rng.randrange(HEADER_SIZE, len(data))] = rng.randrange(256)
        three_ways(bytes(data), HEADER_SIZE, len(data), count)


def padded(n: int, width: int) -> bytes:
    """n as a zigzag varint of exactly `width` bytes (continuation bits on zero groups: a reader must take it)."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    for i in range(width):
        group = u & 0x7F
        u >>= 7
        out.append(group | (0x80 if i < width - 1 else 0))
    assert u == 0, "too wide a value for the width"
    return bytes(out)


def test_padded_varints_in_any_field_are_read_as_the_reference_reads_them():
    """Varints wider than they need be are legal: each field, padded or not, gives the reference's fields
    (a fast path that read two bytes of a three-byte varint would land inside it, and can land in step)."""
    out, count = bytearray(), 0
    for widths in itertools.product((1, 2, 3), repeat=5):
        for ts, delta, klen, vlen in itertools.product((0, 1), (0, 1), (-1, 1), (3, 5)):  # each record 9 bytes or more
            body = b"\x00" + padded(ts, widths[0]) + padded(delta, widths[1]) + padded(klen, widths[2]) \
                + b"k" * max(klen, 0) + padded(vlen, widths[3]) + b"v" * vlen + padded(0, widths[4])
            out += padded(len(body), 1) + body
            count += 1
    fields = three_ways(bytes(out), 0, len(out), count)
    assert len(fields) == count and fields[-1, 0] == len(out)


def test_random_records_of_padded_varints_are_read_as_the_reference_reads_them():
    """Small fields in varints of one to three bytes, and keys, values and headers of bytes that read as small
    varints too (0 and 1), so that a field misread can land in step with the rest of its record."""
    rng = random.Random(5)
    filler = lambda n: bytes(rng.choice((0, 2)) for _ in range(max(n, 0)))  # noqa: E731
    out, count = bytearray(), 0
    for _ in range(20_000):
        w = lambda: rng.choice((1, 1, 2, 3))  # noqa: E731
        klen, vlen = rng.randint(-1, 3), rng.randint(-1, 3)
        body = b"\x00" + padded(rng.randint(-2, 2), w()) + padded(rng.randint(0, 2), w()) + padded(klen, w()) \
            + filler(klen) + padded(vlen, w()) + filler(vlen)
        headers = rng.choice((0, 0, 1, 2))
        body += padded(headers, w())
        for _ in range(headers):
            hk, hv = rng.randint(-1, 2), rng.randint(-1, 2)
            body += padded(hk, w()) + filler(hk) + padded(hv, w()) + filler(hv)
        out += padded(len(body), w()) + body
        count += 1
    fields = three_ways(bytes(out), 0, len(out), count)
    assert len(fields) == count and fields[-1, 0] == len(out)


def test_records_with_lengths_below_minus_one_are_bad_on_every_path():
    """A key, value or header length under -1 is refused; one record at a time, so each is reached."""
    rng = random.Random(8)
    bad = 0
    for _ in range(3000):
        klen, vlen = rng.randint(-3, 2), rng.randint(-3, 2)
        hk = rng.randint(-3, 2)
        body = b"\x00\x00\x00" + padded(klen, 1) + b"\x00" * max(klen, 0) + padded(vlen, 1) + b"\x00" * max(vlen, 0)
        body += padded(1, 1) + padded(hk, 1) + b"\x00" * max(hk, 0) + padded(0, 1) if rng.random() < 0.3 \
            else b"\x00" * rng.choice((1, 2))
        record = padded(len(body), 1) + body
        fields = three_ways(record, 0, len(record), 1)
        bad += fields[0, 0] == rf.BAD
    assert 0 < bad < 3000
