"""The cleaner's batch and record kernels against their plain-Python references on random segments."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mmlog.log.cleaner import kernels as ck
from mmlog.log.kernels import CRC_TABLES
from mmlog.protocol import records as rec


def random_segment(rng: random.Random, batches: int) -> bytes:
    out, offset = bytearray(), 100
    for _ in range(batches):
        start = 1_700_000_000_000 + rng.randrange(10**6)
        records = [rec.Record(None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 300)),
                              None if rng.random() < 0.1 else b"k%d" % rng.randrange(9),
                              timestamp=start + rng.choice([0, rng.randrange(10**7)]))
                   for _ in range(rng.randrange(1, 8))]
        batch = rec.build_batch(records, base_offset=offset)
        offset += len(records) + rng.randrange(0, 3)  # gaps, as a compacted log has
        out += batch
    return bytes(out)


def walk_both(data: bytes):
    buf = np.frombuffer(data, np.uint8)
    nb, nr, _ = ck.count_batches(buf, 0, len(buf))
    out = []
    for fn in (ck.walk_segment, ck.walk_segment_py):
        arrays = (np.zeros((nb, ck.NCOLS), np.int64), np.zeros(nr, np.uint64), np.zeros(nr, np.uint64),
                  np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64))
        status = fn(buf, 0, len(buf), *arrays)
        out.append((status, arrays))
    return buf, out


@pytest.mark.parametrize("seed", range(4))
def test_walk_segment_matches_its_reference_and_the_records_decoder(seed):
    rng = random.Random(seed)
    data = random_segment(rng, 30)
    _, [(status, arrays), (ref_status, ref_arrays)] = walk_both(data)
    assert tuple(status) == tuple(ref_status) == (ck.WALK_OK, 30)
    for a, b in zip(arrays, ref_arrays):
        assert np.array_equal(a, b)
    decoded = [r for _, h in rec.iter_batches(data) for r in rec.decode_records(data, _)]
    batches, h1, h2, offsets, flags, rstart, rend = arrays
    assert offsets.tolist() == [r.offset for r in decoded]
    assert ((flags & ck.HAS_KEY) != 0).tolist() == [r.key is not None for r in decoded]
    assert ((flags & ck.NULL_VALUE) != 0).tolist() == [r.value is None for r in decoded]


@pytest.mark.parametrize("seed", range(4))
def test_windows_are_runs_of_whole_batches_within_the_limits_as_the_reference_cuts_them(seed):
    rng = random.Random(seed)
    data = random_segment(rng, 30)
    torn = data + data[:40]  # a cut-off batch at the end: windows stop before it, as count_batches does
    buf = np.frombuffer(torn, np.uint8)
    for limit, max_records in ((1, 99), (200, 99), (1000, 99), (len(data), 99), (len(data), 5), (len(data), 1)):
        ends, start = [], 0
        while (end := ck.window_end(buf, start, len(buf), limit, max_records)) > start:
            assert end == ck.window_end_py(buf, start, len(buf), limit, max_records)
            batches, records, _ = ck.count_batches(buf, start, end)
            assert (end - start <= limit and records <= max_records) or batches == 1  # a larger batch alone
            ends.append(end)
            start = end
        assert start == len(data)  # every whole batch, and not the torn tail
        assert sum(ck.count_batches(buf, a, b)[0] for a, b in zip([0] + ends, ends)) == 30


@pytest.mark.parametrize("seed", range(4))
def test_rewrite_matches_its_reference_for_every_action_and_keeps_only_the_kept_records(seed):
    rng = random.Random(seed)
    data = random_segment(rng, 25)
    buf, [(_, arrays), _] = walk_both(data)
    batches, h1, h2, offsets, flags, rstart, rend = arrays
    keep = np.array([rng.random() < 0.5 for _ in range(len(offsets))])
    actions = np.array([rng.choice([ck.DROP, ck.COPY, ck.REBUILD, ck.EMPTY]) for _ in range(len(batches))], np.int64)
    # some rebuilt batches stamped with a delete horizon, before or far after their records' timestamps
    horizons = np.array([rng.choice([-1, -1, 0, 1, 2**41 + rng.randrange(10**6)]) for _ in range(len(batches))],
                        np.int64)
    side = np.zeros(0, np.uint8)
    zeros = np.zeros(len(batches), np.int64)
    room = len(data) + 10 * len(offsets)
    out, ref = np.zeros(room, np.uint8), np.zeros(room, np.uint8)
    n = ck.rewrite(buf, batches, actions, keep, rstart, rend, side, zeros, zeros, horizons, out, CRC_TABLES)
    assert n == ck.rewrite_py(buf, batches, actions, keep, rstart, rend, side, zeros, zeros, horizons, ref)
    assert out[:n].tobytes() == ref[:n].tobytes()
    written = out[:n].tobytes()
    headers = rec.validate_batches(written, dense=False) if n else []  # every batch CRC-valid
    original = {r.offset: r for pos, _ in rec.iter_batches(data) for r in rec.decode_records(data, pos)}
    expected = []
    for b, action in enumerate(actions):
        first, count = batches[b, ck.FIRST_ROW], batches[b, ck.COUNT]
        rows = range(first, first + count)
        if action == ck.COPY:
            expected.append(list(offsets[rows]))
        elif action == ck.REBUILD:
            expected.append([offsets[r] for r in rows if keep[r]])
        elif action == ck.EMPTY:
            expected.append([])
    got = [[r.offset for r in rec.decode_records(written, pos)] for pos, _ in rec.iter_batches(written)]
    assert got == expected
    kept_batches = [b for b, a in enumerate(actions) if a != ck.DROP]
    assert [(h.base_offset, h.last_offset) for h in headers] == \
        [(batches[b, ck.BASE], batches[b, ck.LAST]) for b in kept_batches]  # offsets never change
    for (pos, h), b in zip(rec.iter_batches(written), kept_batches):
        stamped = actions[b] == ck.REBUILD and horizons[b] >= 0
        assert bool(h.attributes & ck.DELETE_HORIZON_BIT) == stamped
        if stamped:
            assert h.base_timestamp == horizons[b]
        for r in rec.decode_records(written, pos):  # every record keeps its key, value and timestamp
            o = original[r.offset]
            assert (r.key, r.value, r.timestamp, r.headers) == (o.key, o.value, o.timestamp, o.headers)
