"""Key -> partition: Java's murmur2, checked against kafka-python; sticky partitioning for null keys."""

import random
import zlib

import numpy as np
import pytest
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from mmlog.client import partitioner as P
from mmlog.client.accumulator import RecordAccumulator


def random_keys(n, seed=7, max_len=64):
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(0, max_len)) for _ in range(n)]


class FakeKafkaPythonCluster:
    """Just enough of kafka-python's ClusterMetadata for DefaultPartitioner."""

    def __init__(self, topic, partitions):
        self._topic, self._partitions = topic, partitions

    def topics(self):
        return {self._topic}

    def partitions_for_topic(self, topic):
        return set(range(self._partitions))

    def available_partitions_for_topic(self, topic):
        return set(range(self._partitions))


def test_murmur2_kernel_reference_and_kafka_python_agree_on_random_keys():
    for key in random_keys(3000):
        expected = kafka_python_murmur2(key)
        assert P.murmur2_py(key) == expected
        assert int(P.murmur2(key)) == expected


def test_partition_for_key_equals_kafka_python_default_partitioner():
    rng = random.Random(11)
    partitioner = DefaultPartitioner()
    for key in random_keys(2000, seed=3):
        n = rng.choice([1, 2, 3, 6, 7, 12, 64, 100, 1000])
        expected = partitioner.partition("t", key, key, b"", b"", FakeKafkaPythonCluster("t", n))
        assert P.partition_for_key(key, n) == expected
        assert P.partition_for_key_py(key, n) == expected


def test_the_interop_brief_vectors_on_six_partitions():
    # confluent-kafka murmur2_random, kafka-python and Python murmur2 agree
    keys = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "", "user-42"]
    assert [P.partition_for_key(k.encode(), 6) for k in keys] == [4, 5, 0, 2, 5, 3, 0, 5, 3, 4]


def test_vectorised_partitions_equal_the_reference_with_null_keys():
    keys = random_keys(5000, seed=5)
    keys = [None if i % 7 == 3 else k for i, k in enumerate(keys)]
    data = b"".join(k for k in keys if k is not None)
    lengths = np.array([-1 if k is None else len(k) for k in keys], dtype=np.int64)
    starts = np.cumsum(np.maximum(lengths, 0)) - np.maximum(lengths, 0)
    buf = np.frombuffer(data, dtype=np.uint8)
    for n in (1, 5, 16, 97):
        got = P.partitions_for_keys(buf, starts, lengths, n)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, P.partitions_for_keys_py(buf, starts, lengths, n))
        assert (got[lengths < 0] == -1).all()
    hashes = P.murmur2_many(buf, starts, lengths)
    assert [int(h) for h, k in zip(hashes, keys) if k is not None] == \
        [kafka_python_murmur2(k) for k in keys if k is not None]


def test_named_and_custom_partitioners():
    one, many = P.resolve("crc32")
    assert one(b"user-42", 7) == zlib.crc32(b"user-42") % 7
    buf = np.frombuffer(b"user-42abc", dtype=np.uint8)
    assert many(buf, np.array([0, 7, 7]), np.array([7, -1, 3]), 7).tolist() == [
        zlib.crc32(b"user-42") % 7, -1, zlib.crc32(b"abc") % 7]
    one, many = P.resolve(lambda key, n: len(key) % n)
    assert one(b"abc", 2) == 1
    buf = np.frombuffer(b"abcde", dtype=np.uint8)
    assert many(buf, np.array([0, 3]), np.array([3, -1]), 2).tolist() == [1, -1]
    with pytest.raises(ValueError, match="unknown partitioner"):
        P.resolve("round-robin-please")


def test_null_keys_stick_to_one_partition_until_its_batch_closes():
    counts = {"t": 4}
    acc = RecordAccumulator(batch_size=10_000, linger=1.0, max_records=5, buffer_memory=1 << 30,
                            partition_counts=counts)
    seen = []
    for _ in range(40):
        future, closed, _ = acc.append("t", None, b"v", None, 0, None, 13, None)
        seen.append((future._batch.partition, closed))
    # records come in runs of 5 (one batch each) on one partition; a run's successor is elsewhere
    runs = [seen[i:i + 5] for i in range(0, 40, 5)]
    for run in runs:
        assert len({p for p, _ in run}) == 1
        assert [closed for _, closed in run] == [False] * 4 + [True]
    partitions = [run[0][0] for run in runs]
    assert all(a != b for a, b in zip(partitions, partitions[1:]))
    assert len(set(partitions)) > 1


def test_single_partition_topic_stays_put():
    acc = RecordAccumulator(batch_size=10_000, linger=1.0, max_records=2, buffer_memory=1 << 30,
                            partition_counts={"t": 1})
    assert {acc.append("t", None, b"v", None, 0, None, 13, None)[0]._batch.partition for _ in range(10)} == {0}


def sticky_runs(acc, records: int = 200) -> list[int]:
    """The partition of each closed batch of null-keyed records (batches of 5)."""
    return [acc.append("t", None, b"v", None, 0, None, 13, None)[0]._batch.partition for _ in range(records)][::5]


def test_null_keys_only_go_to_partitions_with_a_live_leader():
    acc = RecordAccumulator(batch_size=10_000, linger=1.0, max_records=5, buffer_memory=1 << 30,
                            partition_counts={})
    acc.learn("t", (0, 1, -1, 2, 1, 2), live={0: ..., 1: ...})  # 2: leaderless; node 2: not a live broker
    assert acc.partition_counts["t"] == 6
    partitions = sticky_runs(acc)
    assert set(partitions) == {0, 1, 4}  # every available one, in time, and no other
    assert all(a != b for a, b in zip(partitions, partitions[1:]))


def test_a_sticky_partition_that_loses_its_leader_is_given_up():
    acc = RecordAccumulator(batch_size=10_000, linger=1.0, max_records=5, buffer_memory=1 << 30,
                            partition_counts={})
    acc.learn("t", (0, 1, 0, 1), live={0: ..., 1: ...})
    first = acc.append("t", None, b"v", None, 0, None, 13, None)[0]._batch.partition
    leaders = [0, 1, 0, 1]
    leaders[first] = -1
    acc.learn("t", tuple(leaders), live={0: ..., 1: ...})
    assert first not in sticky_runs(acc, 100)
    # the leader is back: every partition is chosen again
    acc.learn("t", (0, 1, 0, 1), live={0: ..., 1: ...})
    assert set(sticky_runs(acc, 400)) == {0, 1, 2, 3}


def test_with_no_partition_available_null_keys_still_go_somewhere():
    """Nothing to prefer: any partition (its batches wait for a leader, as in Kafka)."""
    acc = RecordAccumulator(batch_size=10_000, linger=1.0, max_records=5, buffer_memory=1 << 30,
                            partition_counts={})
    acc.learn("t", (-1, -1, -1), live={})
    assert set(sticky_runs(acc, 300)) == {0, 1, 2}
