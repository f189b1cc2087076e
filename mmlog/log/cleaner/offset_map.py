"""The log cleaner's offset map: key hash -> latest offset, in numpy arrays filled by numba.

Kafka's SkimpyOffsetMap, in the same spirit: a fixed block of memory
(`log.cleaner.dedupe.buffer.size`) holding an open-addressing hash table with
linear probing, one 24-byte slot per key:

    h1  uint64   first half of the key's 128-bit hash
    h2  uint64   second half
    off int64    latest offset of a record with that key (-1: empty slot)

Keys are never stored, only their 128-bit hash (Kafka keeps 16 bytes of MD5): two
distinct keys collide with probability about n^2 / 2^129, 10^-23 for a billion keys.
A collision would make the cleaner drop a record whose key only looks overwritten.

The table is filled at most to `load_factor` of its slots (Kafka's
log.cleaner.io.buffer.load.factor, 0.9); the cleaner checks, before each segment,
that the keys it may add still fit, and cleans fewer segments when they do not.

Hashing (`hash_keys`) and the table operations (`put_many`, `get_many`) are numba
kernels over whole arrays of records: no Python loop per record. Each has a plain
Python reference (`*_py`) that tests compare it with.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SLOT_BYTES = 24
_M1 = np.uint64(0x100000001B3)  # FNV-1a 64 prime
_B1 = np.uint64(0xCBF29CE484222325)  # FNV-1a 64 offset basis
_M2 = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier (a second, independent walk)
_B2 = np.uint64(0x243F6A8885A308D3)
_MASK64 = (1 << 64) - 1


@njit(cache=True, inline="always")
def _fmix(h):
    """murmur3's 64-bit finaliser: every input bit reaches every output bit."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True)
def hash_key(buf, start, length):
    """(h1, h2): the 128-bit hash of buf[start:start + length]."""
    h1 = _B1 ^ np.uint64(length)
    h2 = _B2 + np.uint64(length)
    for i in range(start, start + length):
        b = np.uint64(buf[i])
        h1 = (h1 ^ b) * _M1
        h2 = ((h2 ^ b) * _M2) ^ (h2 >> np.uint64(29))
    return _fmix(h1), _fmix(h2 ^ h1)


@njit(cache=True)
def hash_keys(buf, key_start, key_len, out_h1, out_h2):
    """Hash every key buf[key_start[i]:key_start[i] + key_len[i]] (key_len < 0: no key, hash 0, 0)."""
    for i in range(key_start.shape[0]):
        if key_len[i] < 0:
            out_h1[i] = 0
            out_h2[i] = 0
        else:
            out_h1[i], out_h2[i] = hash_key(buf, key_start[i], key_len[i])


def hash_key_py(data: bytes) -> tuple[int, int]:
    """Reference for hash_key over Python ints."""

    def fmix(h: int) -> int:
        h ^= h >> 33
        h = h * 0xFF51AFD7ED558CCD & _MASK64
        h ^= h >> 33
        h = h * 0xC4CEB9FE1A85EC53 & _MASK64
        return h ^ h >> 33

    h1 = int(_B1) ^ len(data)
    h2 = int(_B2) + len(data) & _MASK64
    for b in data:
        h1 = (h1 ^ b) * int(_M1) & _MASK64
        h2 = ((h2 ^ b) * int(_M2) & _MASK64) ^ (h2 >> 29)
    return fmix(h1), fmix(h2 ^ h1)


@njit(cache=True)
def _slot(t1, t2, toff, h1, h2):
    """Where (h1, h2) is, or the empty slot where it would go."""
    n = np.uint64(t1.shape[0])
    i = (h1 ^ (h2 >> np.uint64(17))) % n
    while True:
        if toff[i] < 0 or (t1[i] == h1 and t2[i] == h2):
            return i
        i += np.uint64(1)
        if i == n:
            i = np.uint64(0)


@njit(cache=True)
def put_many(t1, t2, toff, h1, h2, offsets, mask, used, limit):
    """Record offsets[i] as the latest offset of key (h1[i], h2[i]) where mask[i]; in order, so a later
    record of a key wins. Stops before the table would hold more than `limit` keys.

    Returns (keys now held, records consumed): consumed < len(h1) means the table is full."""
    for i in range(h1.shape[0]):
        if not mask[i]:
            continue
        s = _slot(t1, t2, toff, h1[i], h2[i])
        if toff[s] < 0:
            if used >= limit:
                return used, i
            t1[s] = h1[i]
            t2[s] = h2[i]
            used += 1
        toff[s] = offsets[i]
    return used, h1.shape[0]


@njit(cache=True)
def get_many(t1, t2, toff, h1, h2, out):
    """out[i] = the latest offset of key (h1[i], h2[i]), or -1 if the table does not hold it."""
    for i in range(h1.shape[0]):
        out[i] = toff[_slot(t1, t2, toff, h1[i], h2[i])]


class OffsetMap:
    """A fixed-size map from key hash to the latest offset of that key."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self._slots = max(memory_bytes // SLOT_BYTES, 2)
        self.h1 = self.h2 = self.off = None  # allocated at the first clear(): a broker that never compacts
        self.limit = min(int(self._slots * load_factor), self._slots - 1)  # one empty slot ends every probe
        self.size = 0
        self.latest_offset = -1  # the largest offset put so far

    @property
    def slots(self) -> int:
        return self._slots

    def free(self) -> int:
        """Keys that may still be added."""
        return self.limit - self.size

    def clear(self) -> None:
        """Empty the map (and allocate it the first time: its memory is only used once a log is cleaned)."""
        if self.off is None:
            self.h1 = np.zeros(self._slots, dtype=np.uint64)
            self.h2 = np.zeros(self._slots, dtype=np.uint64)
            self.off = np.full(self._slots, -1, dtype=np.int64)
        else:
            self.off.fill(-1)
        self.size = 0
        self.latest_offset = -1

    def put(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray, mask: np.ndarray | None = None) -> bool:
        """Put records (in offset order); False if the map filled up before the last one (it then
        holds a prefix of them)."""
        if self.off is None:
            self.clear()
        if mask is None:
            mask = np.ones(len(h1), dtype=np.bool_)
        self.size, consumed = put_many(self.h1, self.h2, self.off, h1, h2, offsets, mask, self.size, self.limit)
        kept = offsets[:consumed][mask[:consumed]]
        if len(kept):
            self.latest_offset = max(self.latest_offset, int(kept.max()))
        return consumed == len(h1)

    def get(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """The latest offset of each key (-1 where the map does not hold it)."""
        if self.off is None:
            self.clear()
        out = np.empty(len(h1), dtype=np.int64)
        get_many(self.h1, self.h2, self.off, h1, h2, out)
        return out


class OffsetMapPy:
    """Reference for OffsetMap: a dict."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[tuple[int, int], int] = {}

    def put(self, h1, h2, offsets, mask=None) -> bool:
        for i in range(len(h1)):
            if mask is not None and not mask[i]:
                continue
            key = (int(h1[i]), int(h2[i]))
            if key not in self.entries and len(self.entries) >= self.limit:
                return False
            self.entries[key] = int(offsets[i])
        return True

    def get(self, h1, h2) -> np.ndarray:
        return np.array([self.entries.get((int(a), int(b)), -1) for a, b in zip(h1, h2)], dtype=np.int64)


def warm() -> None:
    """Compile the kernels (before forking)."""
    m = OffsetMap(1024)
    m.clear()
    buf = np.frombuffer(b"key", dtype=np.uint8)
    h1 = np.zeros(1, np.uint64)
    h2 = np.zeros(1, np.uint64)
    hash_keys(buf, np.zeros(1, np.int64), np.full(1, 3, np.int64), h1, h2)
    m.put(h1, h2, np.zeros(1, np.int64))
    m.get(h1, h2)
