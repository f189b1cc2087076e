"""Every numba kernel agrees with its plain-Python reference on random input (STYLE principle 13)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from crc32c import crc32c as crc32c_package
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.log import kernels
from mmlog.protocol import records as rec
from mmlog.system import cpu
from tests.log.logtools import random_records

T = kernels.CRC_TABLES


def as_array(data) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=np.uint8)


def random_segment(rng: random.Random, batches: int, base: int = 0, ts_spread: int = 0) -> tuple[bytes, list]:
    """Back-to-back batches with offsets from base; returns the bytes and [(position, header)]."""
    out = bytearray()
    offset = base
    for _ in range(batches):
        b = rec.build_batch(random_records(rng, rng.randrange(1, 5), ts_spread=ts_spread),
                            compression=1 if rng.random() < 0.1 else 0)
        rec.set_base_offset(b, offset)
        offset += rec.read_header(b).last_offset_delta + 1
        out += b
    return bytes(out), list(rec.iter_batches(out))


# ---------------------------------------------------------------- CRC-32C


def test_crc32c_kernel_check_value():
    assert kernels.crc32c(as_array(b"123456789"), 0, 9, T) == 0xE3069283


def test_crc32c_of_nothing_is_zero():
    assert kernels.crc32c(as_array(b"abc"), 1, 1, T) == 0


@pytest.mark.parametrize("seed", range(4))
def test_crc32c_kernel_matches_the_crc32c_package_on_random_lengths_and_offsets(seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 12_000, dtype=np.uint8)
    for _ in range(100):
        length = int(rng.integers(0, 5001))
        start = int(rng.integers(0, len(data) - length + 1))
        expected = crc32c_package(data[start : start + length].tobytes())
        assert kernels.crc32c(data, start, start + length, T) == expected
        assert kernels.crc32c_tables(data, start, start + length, T) == expected
        assert kernels.crc32c_py(data, start, start + length, T) == expected


@pytest.mark.skipif(not cpu.HAS_SSE42, reason="this CPU has no SSE4.2 crc32 instruction")
def test_the_sse42_kernel_is_the_one_used_and_agrees_on_every_short_length_and_alignment():
    assert kernels.crc32c is kernels.crc32c_sse42
    data = np.random.default_rng(9).integers(0, 256, 64, dtype=np.uint8)
    for start in range(9):
        for end in range(start, 64):
            assert kernels.crc32c_sse42(data, start, end, T) == crc32c_package(data[start:end].tobytes())


@pytest.mark.skipif(not cpu.HAS_SSE42, reason="this CPU has no SSE4.2 crc32 instruction")
def test_the_three_interleaved_streams_agree_around_each_step_and_over_a_large_buffer():
    """Lengths on either side of one and two steps of three streams, at every alignment, and 4 MiB (a fetch)."""
    step = 3 * kernels.CRC_BLOCK
    data = np.random.default_rng(10).integers(0, 256, 4 << 20, dtype=np.uint8)
    for start in range(9):
        for length in [*range(step - 9, step + 18), *range(2 * step - 9, 2 * step + 9)]:
            expected = crc32c_package(data[start:start + length].tobytes())
            assert kernels.crc32c_sse42(data, start, start + length, T) == expected
            assert kernels.crc32c_tables(data, start, start + length, T) == expected
    assert kernels.crc32c_sse42(data, 0, len(data), T) == crc32c_package(data.tobytes())


# ---------------------------------------------------------------- index searches


@st.composite
def offset_index(draw, dtype=np.int32, max_key=10_000):
    """A flat index of n strictly increasing keys with garbage slots after the n valid ones."""
    keys = sorted(draw(st.sets(st.integers(0, max_key), max_size=40)))
    n = len(keys)
    extra = draw(st.integers(0, 5))
    flat = np.zeros(2 * (n + extra), dtype=dtype)
    flat[0 : 2 * n : 2] = keys
    flat[1 : 2 * n : 2] = np.arange(n) * 100
    flat[2 * n :] = draw(st.lists(st.integers(-5, max_key), min_size=2 * extra, max_size=2 * extra))
    return flat, n


targets = st.integers(-10, 10_010)


@settings(max_examples=300, deadline=None)
@given(offset_index(), targets)
def test_index_floor_matches_its_reference(index, target):
    flat, n = index
    assert kernels.index_floor(flat, n, target) == kernels.index_floor_py(flat, n, target)


@settings(max_examples=200, deadline=None)
@given(offset_index(), st.lists(targets, max_size=30))
def test_index_floor_many_matches_index_floor_per_target(index, many):
    flat, n = index
    wanted = np.array(many, dtype=np.int64)
    out = np.full(len(many), -7, dtype=np.int64)
    kernels.index_floor_many(flat, n, wanted, out)
    assert out.tolist() == [kernels.index_floor_py(flat, n, t) for t in many]


@settings(max_examples=300, deadline=None)
@given(offset_index(np.int64, 2**45), st.integers(-10, 2**45 + 10))
def test_time_floor_matches_its_reference(index, target):
    flat, n = index
    assert kernels.time_floor(flat, n, target) == kernels.time_floor_py(flat, n, target)


def test_index_floor_finds_the_last_key_at_or_below_the_target():
    flat = np.array([3, 100, 7, 200, 12, 300, 0, 0], dtype=np.int32)
    assert [kernels.index_floor(flat, 3, t) for t in (2, 3, 6, 7, 11, 12, 99)] == [-1, 0, 0, 1, 1, 2, 2]


def test_time_floor_finds_the_last_timestamp_strictly_below_the_target():
    flat = np.array([10, 1, 20, 5, 30, 9], dtype=np.int64)
    assert [kernels.time_floor(flat, 3, t) for t in (5, 10, 11, 20, 21, 31)] == [-1, -1, 0, 0, 1, 2]


# ---------------------------------------------------------------- batch scans


@pytest.mark.parametrize("seed", range(6))
def test_find_batch_matches_its_reference_on_random_segments_starts_ends_and_targets(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 25, base=rng.randrange(0, 10**6))
    buf = as_array(data)
    first, last = batches[0][1].base_offset, batches[-1][1].last_offset
    for _ in range(300):
        start = rng.choice(batches)[0]
        end = rng.randrange(start, len(data) + 1)
        target = rng.randrange(first - 3, last + 4)
        got = tuple(int(v) for v in kernels.find_batch(buf, start, end, target))
        assert got == kernels.find_batch_py(buf, start, end, target)


@pytest.mark.parametrize("seed", range(3))
def test_find_batch_returns_the_batch_holding_the_target(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 30)
    buf = as_array(data)
    for pos, h in batches:
        for offset in range(h.base_offset, h.last_offset + 1):
            assert tuple(kernels.find_batch(buf, 0, len(data), offset)) == (0, pos)
    assert tuple(kernels.find_batch(buf, 0, len(data), batches[-1][1].next_offset)) == (1, len(data))


def test_find_batch_reports_a_bad_length():
    data = bytearray(rec.build_batch([(None, b"x")]))
    data[8:12] = (5).to_bytes(4, "big")
    assert tuple(kernels.find_batch(as_array(data), 0, len(data), 0)) == (3, 0)
    assert kernels.find_batch_py(as_array(data), 0, len(data), 0) == (3, 0)


@pytest.mark.parametrize("seed", range(6))
def test_find_time_matches_its_reference_with_non_monotonic_timestamps(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 25, ts_spread=5_000)
    buf = as_array(data)
    stamps = [r.timestamp for pos, _ in batches for r in rec.decode_records(data, pos)]
    for _ in range(300):
        start = rng.choice(batches)[0]
        end = rng.randrange(start, len(data) + 1)
        target = rng.choice(stamps) + rng.choice([-1, 0, 0, 1, 10_000, -10_000])
        min_offset = rng.choice([0, rng.randrange(0, len(stamps) + 2)])
        got = tuple(int(v) for v in kernels.find_time(buf, start, end, target, min_offset))
        assert got == kernels.find_time_py(buf, start, end, target, min_offset)


def three_batches_of_two():
    """Offsets 0-5 in three 2-record batches with timestamps 50, 10 | 70, 20 | 90, 30: (bytes, array, batch size)."""
    stamps = [50, 10, 70, 20, 90, 30]
    data = bytearray()
    for i in range(0, 6, 2):
        b = rec.build_batch([rec.Record(b"v", timestamp=stamps[i]), rec.Record(b"v", timestamp=stamps[i + 1])])
        rec.set_base_offset(b, i)
        data += b
    return data, as_array(data), len(data) // 3


def test_find_time_returns_the_first_record_reaching_the_target():
    data, buf, size = three_batches_of_two()
    expect = {0: (0, 0, 50), 50: (0, 0, 50), 51: (size, 2, 70), 70: (size, 2, 70), 71: (2 * size, 4, 90),
              90: (2 * size, 4, 90)}
    for target, (pos, offset, timestamp) in expect.items():
        assert tuple(kernels.find_time(buf, 0, len(data), target, 0)) == (0, pos, offset, timestamp)
    assert tuple(kernels.find_time(buf, 0, len(data), 91, 0)) == (1, len(data), -1, -1)


def test_find_time_skips_records_below_the_minimum_offset():
    data, buf, size = three_batches_of_two()
    expect = {(0, 1): (0, 1, 10), (11, 1): (size, 2, 70), (20, 3): (size, 3, 20), (50, 1): (size, 2, 70),
              (30, 5): (2 * size, 5, 30), (31, 5): None, (0, 6): None}
    for (target, min_offset), found in expect.items():
        got = tuple(kernels.find_time(buf, 0, len(data), target, min_offset))
        assert got == ((0, *found) if found else (1, len(data), -1, -1)), (target, min_offset)
        assert kernels.find_time_py(buf, 0, len(data), target, min_offset) == got


# ---------------------------------------------------------------- recovery scan


def _scan_both(data: bytes, end: int, base: int, next_offset: int, interval: int, check_crc: bool, capacity: int):
    buf = as_array(data)
    outs = []
    for fn in (kernels.scan_segment, kernels.scan_segment_py):
        index_out = np.zeros(2 * capacity, dtype=np.int32)
        time_out = np.zeros(2 * capacity, dtype=np.int64)
        result = tuple(int(v) for v in fn(buf, 0, end, base, next_offset, interval, check_crc, T, index_out, time_out))
        outs.append((result, index_out.tolist(), time_out.tolist()))
    assert outs[0] == outs[1]
    return outs[0][0]


@pytest.mark.parametrize("seed", range(4))
def test_scan_segment_matches_its_reference_on_a_valid_segment(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 40, base=1000, ts_spread=10_000)
    for interval in (0, 1, 300, 4096):
        for capacity in (1, 3, 64):
            result = _scan_both(data, len(data), 1000, 1000, interval, True, capacity)
            assert result[:4] == (kernels.SCAN_END, len(data), batches[-1][1].next_offset, len(batches))


@pytest.mark.parametrize("seed", range(2))
def test_scan_segment_matches_its_reference_when_cut_at_every_byte_of_the_last_batches(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 12)
    boundaries = [pos for pos, _ in batches] + [len(data)]
    for end in range(batches[-3][0], len(data) + 1):
        result = _scan_both(data, end, 0, 0, 200, True, 16)
        whole = max(b for b in boundaries if b <= end)
        assert result[1] == whole
        assert result[0] == (kernels.SCAN_END if end == whole else kernels.SCAN_TORN)


@pytest.mark.parametrize("seed", range(4))
def test_scan_segment_matches_its_reference_with_a_flipped_byte_anywhere(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 15)
    for _ in range(150):
        bad = bytearray(data)
        at = rng.randrange(len(bad))
        bad[at] ^= 1 << rng.randrange(8)
        hit = max(pos for pos, _ in batches if pos <= at)
        for check_crc in (True, False):
            result = _scan_both(bytes(bad), len(bad), 0, 0, 100, check_crc, 32)
            if check_crc and not 12 <= at - hit < 16:  # the leader epoch is outside every check
                assert result[0] != kernels.SCAN_END and result[1] == hit


@pytest.mark.parametrize("seed", range(4))
def test_scan_segment_matches_its_reference_with_garbage_appended(seed):
    rng = random.Random(seed)
    data, batches = random_segment(rng, 10)
    for _ in range(100):
        garbage = rng.randbytes(rng.randrange(1, 400))
        if rng.random() < 0.3:  # garbage that starts like a plausible header
            garbage = batches[0][1].base_offset.to_bytes(8, "big") + rng.randbytes(4) + garbage
        result = _scan_both(data + garbage, len(data) + len(garbage), 0, 0, 128, True, 32)
        assert result[0] != kernels.SCAN_END and result[1] == len(data)


def test_scan_segment_rejects_a_batch_that_does_not_start_at_the_expected_offset():
    rng = random.Random(7)
    data, batches = random_segment(rng, 5, base=100)
    result = _scan_both(data, len(data), 100, 99, 128, True, 8)
    assert result[:2] == (kernels.SCAN_BAD_OFFSET, 0)
    second = batches[1][0]
    bad = bytearray(data)
    rec.set_base_offset(bad, batches[1][1].base_offset + 1, second)  # outside the CRC: only continuity sees it
    assert _scan_both(bytes(bad), len(bad), 100, 100, 128, True, 8)[:2] == (kernels.SCAN_BAD_OFFSET, second)


def test_scan_segment_builds_the_index_entries_an_append_would():
    """An entry for each batch starting index.interval.bytes or more after the previous entry, never at 0."""
    rng = random.Random(3)
    data, batches = random_segment(rng, 30)
    index_out = np.zeros(200, dtype=np.int32)
    time_out = np.zeros(200, dtype=np.int64)
    _, _, _, _, n_idx, _, _, _, since = kernels.scan_segment(
        as_array(data), 0, len(data), 0, 0, 500, True, T, index_out, time_out
    )
    expected, acc = [], 0
    for i, (pos, h) in enumerate(batches):
        if acc >= 500 and i > 0:
            expected.append((h.base_offset, pos))
            acc = 0
        acc += h.size
    assert [tuple(p) for p in index_out[: 2 * n_idx].reshape(-1, 2).tolist()] == expected
    assert since == acc


def test_warm_compiles_every_kernel():
    kernels.warm()
    for name in ("crc32c", "index_floor", "index_floor_many", "time_floor", "find_batch", "find_time", "scan_segment"):
        assert getattr(kernels, name).signatures, name
