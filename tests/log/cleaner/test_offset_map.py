"""The cleaner's offset map against a dict, and its key hash against the plain-Python reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mmlog.log.cleaner.offset_map import OffsetMap, OffsetMapPy, hash_key, hash_key_py, hash_keys


@pytest.mark.parametrize("seed", range(3))
def test_the_key_hash_kernel_matches_its_reference_on_random_keys(seed):
    rng = random.Random(seed)
    for _ in range(200):
        key = rng.randbytes(rng.randrange(0, 70))
        assert hash_key(np.frombuffer(key, np.uint8) if key else np.zeros(0, np.uint8), 0, len(key)) == \
            hash_key_py(key)


def test_hash_keys_hashes_each_slice_and_gives_no_key_zero():
    buf = np.frombuffer(b"alphabetagamma", np.uint8)
    starts, lens = np.array([0, 5, 9, 0], np.int64), np.array([5, 4, 5, -1], np.int64)
    h1, h2 = np.zeros(4, np.uint64), np.zeros(4, np.uint64)
    hash_keys(buf, starts, lens, h1, h2)
    assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [hash_key_py(b"alpha"), hash_key_py(b"beta"),
                                                          hash_key_py(b"gamma"), (0, 0)]


@pytest.mark.parametrize("seed", range(4))
def test_the_map_keeps_the_latest_offset_of_each_key_as_a_dict_does(seed):
    rng = random.Random(seed)
    m = OffsetMap(24 * 4096)
    ref = OffsetMapPy(m.limit)
    offset = 0
    for _ in range(20):
        n = rng.randrange(1, 300)
        keys = [b"k%d" % rng.randrange(2000) for _ in range(n)]
        hashes = [hash_key_py(k) for k in keys]
        h1 = np.array([a for a, _ in hashes], np.uint64)
        h2 = np.array([b for _, b in hashes], np.uint64)
        offsets = np.arange(offset, offset + n, dtype=np.int64)
        mask = np.array([rng.random() < 0.9 for _ in range(n)])
        offset += n
        assert m.put(h1, h2, offsets, mask) == ref.put(h1, h2, offsets, mask)
        assert m.size == len(ref.entries)
        probe = np.array([a for a, _ in hashes] + [12345], np.uint64), np.array([b for _, b in hashes] + [6789],
                                                                               np.uint64)
        assert m.get(*probe).tolist() == ref.get(*probe).tolist()


def test_a_full_map_says_so_and_holds_the_prefix_it_took():
    m = OffsetMap(24 * 10, load_factor=0.5)  # 10 slots, 5 keys
    h = np.arange(1, 9, dtype=np.uint64)
    assert not m.put(h, h, np.arange(8, dtype=np.int64))
    assert m.size == 5 and m.latest_offset == 4
    assert m.get(h, h).tolist() == [0, 1, 2, 3, 4, -1, -1, -1]
