"""The partition table of the compiled append: found by name bytes and partition from compiled code, and
forgotten before the mappings its rows point into close or move."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import append_kernel as ak
from mmlog.log import partition_table as pt
from mmlog.log.manager import LogManager
from mmlog.log.partition_table import PartitionTable
from mmlog.protocol import records as rec


@pytest.fixture(scope="module", autouse=True)
def warm():
    ak.warm()


def find(table: PartitionTable, topic: str, partition: int, pad: int = 5) -> int:
    """`lookup` as compiled code calls it: the name in the middle of a receive buffer."""
    name = topic.encode()
    buf = np.frombuffer(b"\x00" * pad + name + b"\xff" * 3, dtype=np.uint8)
    slots, rows, names = table.arrays()
    return int(pt.lookup(slots, rows, names, buf, pad, len(name), partition))


def test_a_filled_row_holds_the_partitions_addresses_and_config(open_partition):
    config = LogConfig(segment_bytes=5000, segment_ms=1234, max_message_bytes=999, index_interval_bytes=77,
                       flush_messages=10, flush_ms=20, min_insync_replicas=2, compression_type="uncompressed",
                       segment_index_bytes=1 << 20)
    p = open_partition(cfg=config)
    p.append(rec.build_batch([(b"k", b"v")]))
    table = PartitionTable()
    row = table.fill("orders", 3, p)
    assert find(table, "orders", 3) == row == table.row_of("orders", 3)
    r = table.rows[row]
    snap = p.snapshot()
    active = p._segments[snap.active_base]
    assert r[pt.STATE_ADDR] == p.state._slots.ctypes.data
    assert (r[pt.LOCK_ADDR], r[pt.LOG_FD]) == (p.lock.mutex_address, active.file.fileno())
    assert (r[pt.GENERATION], r[pt.ACTIVE_BASE]) == (snap.generation, snap.active_base)
    assert r[pt.OFFSET_INDEX_ADDR] == active.offset_index.flat.ctypes.data
    assert r[pt.TIME_INDEX_ADDR] == active.time_index.flat.ctypes.data
    assert r[pt.OFFSET_INDEX_CAPACITY] == active.offset_index.capacity == (1 << 20) // 8
    assert r[pt.OFFSET_INDEX_RESERVED] >= snap.index_entries + 8192
    assert r[pt.TIME_INDEX_RESERVED] >= snap.time_entries + 4096
    assert [r[f] for f in (pt.SEGMENT_BYTES, pt.SEGMENT_MS, pt.MAX_MESSAGE_BYTES, pt.INDEX_INTERVAL_BYTES,
                           pt.FLUSH_MESSAGES, pt.MIN_INSYNC_REPLICAS, pt.PLAIN_BATCHES,
                           pt.COMPACT)] == [5000, 1234, 999, 77, 10, 2, 1, 0]
    assert find(table, "orders", 4) == -1
    assert find(table, "order", 3) == -1
    assert find(table, "ordersx", 3) == -1


def test_many_partitions_found_forgotten_and_filled_again(open_partition, partition_dir):
    """Growth of the rows, the hash index and the names arena; forgotten slots do not cut probes short."""
    table = PartitionTable(4)
    parts = {}
    for i in range(40):
        key = (f"topic-{i % 7}-{'x' * (i % 13)}", i)
        parts[key] = open_partition(partition_dir.parent / f"p{i}")
        table.fill(*key, parts[key])
    rng = random.Random(3)
    keys = list(parts)
    for _ in range(3):
        for key in keys:
            assert find(table, *key, pad=rng.randrange(0, 9)) == table.row_of(*key) >= 0
        gone = rng.sample(keys, 20)
        for key in gone:
            table.forget(*key)
        for key in keys:
            assert (find(table, *key) == -1) == (key in gone)
        for key in gone:
            table.fill(*key, parts[key])
    assert len(table) == 40
    rows = [table.row_of(*key) for key in keys]
    assert len(set(rows)) == 40
    table.clear()
    assert len(table) == 0 and all(find(table, *key) == -1 for key in keys)


def test_a_roll_a_repair_a_new_config_closing_and_deleting_forget_the_row(open_partition, partition_dir):
    table = PartitionTable()
    p = open_partition(cfg=LogConfig(segment_bytes=300))
    table.fill("t", 0, p)
    p.append(rec.build_batch([(b"k", b"v" * 200)]))
    assert table.row_of("t", 0) >= 0  # an append keeps the mappings
    p.append(rec.build_batch([(b"k", b"v" * 200)]))  # rolls
    assert table.row_of("t", 0) == -1
    assert table.ensure("t", 0, p) >= 0
    p.state.set_pending(1)
    p.append(rec.build_batch([(b"k", b"v")]))  # repairs first
    assert table.row_of("t", 0) == -1
    table.fill("t", 0, p)
    p.config = LogConfig(segment_bytes=301)
    assert table.row_of("t", 0) == -1
    row = table.fill("t", 0, p)
    assert table.rows[row, pt.SEGMENT_BYTES] == 301
    p.roll()
    assert table.row_of("t", 0) == -1
    table.fill("t", 0, p)
    p.close()
    assert table.row_of("t", 0) == -1
    q = open_partition(partition_dir.parent / "t-1")
    table.fill("t", 1, q)
    q.delete()
    assert table.row_of("t", 1) == -1


def test_another_partition_object_of_the_same_name_replaces_the_row(open_partition):
    table = PartitionTable()
    p = open_partition()
    table.fill("t", 0, p)
    q = open_partition(recover=False)
    row = table.ensure("t", 0, q)
    assert table.rows[row, pt.STATE_ADDR] == q.state._slots.ctypes.data
    p.close()  # the old object's watcher finds nothing of its own to forget
    assert table.row_of("t", 0) == row


def test_a_log_manager_that_closes_a_partition_has_it_forgotten(tmp_path):
    """Eviction past max_open, deletion and the manager's close: each closes the Partition, whose watcher
    the table armed."""
    m = LogManager(tmp_path, LogConfig(), max_open=2)
    m.create_topic("a", 3)
    m.create_topic("b", 1)
    table = PartitionTable()
    for p in range(3):
        table.fill("a", p, m.partition("a", p))
    assert len(table) <= 2  # the manager kept two open: the first was closed when the third opened
    table.fill("b", 0, m.partition("b", 0))
    assert table.row_of("a", 0) == -1 and table.row_of("b", 0) >= 0
    m.delete_topic("b")
    assert table.row_of("b", 0) == -1
    table.fill("a", 2, m.partition("a", 2))
    m.alter_topic_config("a", {"segment.bytes": "5000"})
    assert table.row_of("a", 2) == -1
    row = table.fill("a", 2, m.partition("a", 2))
    assert table.rows[row, pt.SEGMENT_BYTES] == 5000
    m.close()
    assert len(table) == 0
