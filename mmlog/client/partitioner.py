"""Key -> partition, the way Kafka's Java client does it, one key or millions at a time.

Kafka places a keyed record on ``toPositive(murmur2(key)) % partitions``
(`BuiltInPartitioner.partitionForKey`, `Utils.murmur2`): MurmurHash2 with seed
0x9747b28c, m = 0x5bd1e995, r = 24, over the key's bytes taken four at a time as
little-endian words, and ``toPositive`` masks the sign bit (``& 0x7fffffff``).
kafka-python's DefaultPartitioner and librdkafka's ``murmur2_random`` agree, so a
key produced by mmlog, a Java client, kafka-python or confluent-kafka (with
``partitioner: murmur2_random``) lands on the same partition. librdkafka's own
default, ``consistent_random``, is CRC-32 (zlib) of the key instead: ``"crc32"``
here, for producers that must agree with default-configured librdkafka clients.

Records without a key are not hashed: the producer sends them to a *sticky*
partition, chosen at random and kept until a batch for it is closed (KIP-480),
so null-keyed records fill whole batches instead of one small batch per
partition.

Every hash has a plain-Python reference (``*_py``) beside its numba kernel;
the tests check that they agree, and agree with kafka-python, on random keys.

- `murmur2(key)`               one key (numba, about 0.3 µs a call from Python);
- `murmur2_many(buf, starts, lengths)`  many keys laid out in one buffer;
- `partition_for_key(key, n)`  one key's partition;
- `partitions_for_keys(buf, starts, lengths, n)`  every key's partition (-1 for a null key).
"""

from __future__ import annotations

import zlib
from typing import Callable

import numpy as np
from numba import njit

SEED = 0x9747B28C
M = 0x5BD1E995
R = 24
MASK32 = 0xFFFFFFFF


# ---------------------------------------------------------------- reference


def murmur2_py(data: bytes) -> int:
    """Java's Utils.murmur2 as an unsigned 32-bit int (plain Python reference)."""
    length = len(data)
    h = (SEED ^ length) & MASK32
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * M) & MASK32
        k ^= k >> R
        k = (k * M) & MASK32
        h = ((h * M) & MASK32) ^ k
    tail = length & ~3
    extra = length % 4
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * M) & MASK32
    h ^= h >> 13
    h = (h * M) & MASK32
    h ^= h >> 15
    return h


def partition_for_key_py(key: bytes, partitions: int) -> int:
    return (murmur2_py(key) & 0x7FFFFFFF) % partitions


# ---------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _murmur2_at(buf, start, length):
    """murmur2 of buf[start:start+length]: 64-bit arithmetic masked to 32 bits (numba widens uint32)."""
    mask = np.uint64(MASK32)
    m = np.uint64(M)
    h = (np.uint64(SEED) ^ np.uint64(length)) & mask
    end4 = start + (length - length % 4)
    p = start
    while p < end4:
        k = np.uint64(buf[p]) | (np.uint64(buf[p + 1]) << np.uint64(8)) | (
            np.uint64(buf[p + 2]) << np.uint64(16)) | (np.uint64(buf[p + 3]) << np.uint64(24))
        k = (k * m) & mask
        k ^= k >> np.uint64(R)
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
        p += 4
    extra = length % 4
    if extra >= 3:
        h ^= np.uint64(buf[end4 + 2]) << np.uint64(16)
    if extra >= 2:
        h ^= np.uint64(buf[end4 + 1]) << np.uint64(8)
    if extra >= 1:
        h ^= np.uint64(buf[end4])
        h = (h * m) & mask
    h ^= h >> np.uint64(13)
    h = (h * m) & mask
    h ^= h >> np.uint64(15)
    return np.uint32(h)


@njit(cache=True)
def murmur2(data):
    """Java's Utils.murmur2 of one bytes-like key, as an unsigned 32-bit int."""
    return _murmur2_at(data, 0, len(data))


@njit(cache=True)
def murmur2_many(buf, starts, lengths):
    """murmur2 of each key buf[starts[i] : starts[i] + lengths[i]] (uint32 array; 0 for null keys)."""
    n = starts.shape[0]
    out = np.zeros(n, dtype=np.uint32)
    for i in range(n):
        if lengths[i] >= 0:
            out[i] = _murmur2_at(buf, starts[i], lengths[i])
    return out


@njit(cache=True)
def partitions_for_keys(buf, starts, lengths, partitions):
    """Each key's partition, toPositive(murmur2) % partitions; -1 where the key is null (length < 0)."""
    n = starts.shape[0]
    out = np.empty(n, dtype=np.int32)
    for i in range(n):
        if lengths[i] < 0:
            out[i] = -1
        else:
            out[i] = np.int32(np.int64(_murmur2_at(buf, starts[i], lengths[i]) & np.uint32(0x7FFFFFFF)) % partitions)
    return out


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's partition for a non-null key."""
    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions


def _each_key(one: Callable[[bytes, int], int]) -> Callable:
    """A many-keys partitioner (as `partitions_for_keys`) calling `one(key, partitions)` per non-null key."""

    def many(buf, starts, lengths, partitions) -> np.ndarray:
        data = bytes(buf)
        return np.array([-1 if n < 0 else one(data[s:s + n], partitions)
                         for s, n in zip(starts.tolist(), lengths.tolist())], dtype=np.int32)

    return many


partitions_for_keys_py = _each_key(partition_for_key_py)


# ---------------------------------------------------------------- named partitioners


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default `consistent_random` for non-empty keys: zlib CRC-32 % partitions."""
    return zlib.crc32(key) % partitions


crc32_partitions = _each_key(crc32_partition)

KeyPartitioner = Callable[[bytes, int], int]


def resolve(partitioner) -> tuple[KeyPartitioner, Callable]:
    """(one-key function, many-keys function) for "murmur2", "crc32" or a callable(key, partitions)."""
    if partitioner in ("murmur2", "murmur2_random", "default", None):
        return partition_for_key, partitions_for_keys
    if partitioner in ("crc32", "consistent", "consistent_random"):
        return crc32_partition, crc32_partitions
    if callable(partitioner):
        return partitioner, _each_key(partitioner)
    raise ValueError(f"unknown partitioner {partitioner!r}: want 'murmur2', 'crc32' or a callable(key, partitions)")
