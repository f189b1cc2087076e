"""The compiled append of one request's partitions, all or none: the files end as `append_many` per partition
leaves them, and when any partition cannot be appended by the kernel none of them changes."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from mmlog.config.settings import LogConfig
from mmlog.log import append_kernel as ak
from mmlog.log import partition_table as pt
from mmlog.log.partition import Partition
from mmlog.log.partition_table import PartitionTable
from tests.log.logtools import T0
from tests.log.test_append_kernel import files_of, random_buffer

K = 3
CONFIG = LogConfig(index_interval_bytes=200)


def open_partitions(root: Path, config: LogConfig = CONFIG) -> list[Partition]:
    return [Partition(root / f"t-{i}", config) for i in range(K)]


def request(bufs: list) -> tuple[np.ndarray, np.ndarray]:
    """One receive buffer with the records fields back to back (as one Produce request holds them), and spans."""
    data, spans = bytearray(b"head"), []
    for b in bufs:
        spans.append((len(data), len(b)))
        data += b
    return np.frombuffer(data, np.uint8).copy(), np.array(spans, np.int64)


def kernel_append(table: PartitionTable, parts: list[Partition], bufs: list, now: int, order=None):
    """(status, out) of one append_partitions call over parts (in `order` of the request)."""
    order = order or list(range(len(parts)))
    ids = np.array([table.ensure("t", i, parts[i]) for i in order], np.int64)
    data, spans = request([bufs[i] for i in order])
    out = np.zeros((len(order), 5), np.int64)
    pending = np.zeros((len(order), ak.PENDING_FIELDS), np.int64)
    status = ak.append_partitions(table.rows, ids, len(order), data, spans, now, 1, out, pending)
    return status, out


def test_a_request_of_several_partitions_leaves_the_files_of_append_many(tmp_path, clock):
    rng = random.Random(3)
    python, compiled = open_partitions(tmp_path / "python"), open_partitions(tmp_path / "compiled")
    table = PartitionTable(8)
    for step in range(60):
        clock.now = T0 + step * 7
        bufs = [random_buffer(rng, clock.now) for _ in range(K)]
        order = rng.sample(range(K), rng.randint(1, K))  # a request names some partitions, in any order
        expected = [python[i].append_many([bytearray(bufs[i])])[0] for i in order]
        status, out = kernel_append(table, compiled, [bytearray(b) for b in bufs], clock.now, order)
        assert status == ak.OK
        assert [tuple(row[:3]) for row in out.tolist()] == [(e.base_offset, e.last_offset, e.log_start_offset)
                                                          for e in expected]
    for p in python + compiled:
        p.close()
    for i in range(K):
        assert files_of(tmp_path / "compiled" / f"t-{i}") == files_of(tmp_path / "python" / f"t-{i}")


def test_when_one_partition_needs_the_python_path_none_is_appended(tmp_path, clock):
    rng = random.Random(4)
    parts = open_partitions(tmp_path)
    table = PartitionTable(8)
    for i, part in enumerate(parts):
        part.append_many([random_buffer(rng, T0)])
    before = [files_of(tmp_path / f"t-{i}") for i in range(K)]
    bufs = [random_buffer(rng, T0) for _ in range(K)]
    bufs[2] = bytearray(bufs[2])
    bufs[2][-1] ^= 0xFF  # a bad CRC in the last partition's batch
    status, _ = kernel_append(table, parts, bufs, T0)
    assert status == ak.FALLBACK
    assert [files_of(tmp_path / f"t-{i}") for i in range(K)] == before
    assert ak.REASONS[table.rows[table.row_of("t", 2), pt.FALLBACK_REASON]] == "corrupt batch"


def test_a_roll_due_in_one_partition_leaves_every_partition_as_it_was(tmp_path, clock):
    rng = random.Random(5)
    parts = open_partitions(tmp_path, LogConfig(index_interval_bytes=200, segment_ms=1000))
    table = PartitionTable(8)
    for part in parts:
        part.append_many([random_buffer(rng, T0)])
    table_rows = [table.ensure("t", i, parts[i]) for i in range(K)]
    clock.now = T0 + 500
    parts[1].append_many([random_buffer(rng, clock.now)])  # refreshes nothing: partition 1 rolls at T0 + 1000
    table.ensure("t", 1, parts[1])
    before = [files_of(tmp_path / f"t-{i}") for i in range(K)]
    status, _ = kernel_append(table, parts, [random_buffer(rng, T0) for _ in range(K)], T0 + 1500)
    assert status == ak.FALLBACK  # segment.ms passed for every partition: the first one checked says so
    assert [files_of(tmp_path / f"t-{i}") for i in range(K)] == before
    assert ak.REASONS[table.rows[table_rows[0], pt.FALLBACK_REASON]] == "roll due"


def test_a_partition_named_twice_is_left_to_the_python_path(tmp_path, clock):
    parts = open_partitions(tmp_path)
    table = PartitionTable(8)
    row = table.ensure("t", 0, parts[0])
    data, spans = request([random_buffer(random.Random(6), T0), random_buffer(random.Random(7), T0)])
    out = np.zeros((2, 5), np.int64)
    pending = np.zeros((2, ak.PENDING_FIELDS), np.int64)
    assert ak.append_partitions(table.rows, np.array([row, row]), 2, data, spans, T0, 1, out,
                                pending) == ak.FALLBACK
    assert parts[0].log_end_offset == 0


def test_locks_are_taken_by_inode_with_ties_in_request_order_however_many_partitions():
    """The order every process shares (so that two never wait on each other): the in-place sort of a few
    partitions and numpy's stable argsort of many give the same order."""
    rng = np.random.default_rng(11)
    for k in [1, 2, 3, ak.SORT_IN_PLACE - 1, ak.SORT_IN_PLACE, ak.SORT_IN_PLACE + 1, 40, 300]:
        for _ in range(20):
            rows = np.zeros((k, pt.ROW_FIELDS), np.int64)
            rows[:, pt.LOCK_INODE] = rng.integers(0, max(2, k // 2), k)  # ties, and inodes out of order
            ids = rng.permutation(k).astype(np.int64)
            pending = np.zeros((k, ak.PENDING_FIELDS), np.int64)
            ak._lock_order(rows, ids, k, pending)
            expected = np.argsort(rows[ids, pt.LOCK_INODE], kind="stable")
            assert pending[:, ak.P_LOCK_ORDER].tolist() == expected.tolist()
