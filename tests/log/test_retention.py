"""Retention: the policy on its own, then whole-segment deletion in a partition seen by every process."""

from __future__ import annotations

import gc
import multiprocessing
import os

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import OffsetOutOfRange
from mmlog.log.files import segment_file
from mmlog.log.open_partitions import DESCRIPTORS_PER_PARTITION
from mmlog.log.partition import Partition
from mmlog.log.retention import SegmentSummary, expired_prefix
from mmlog.protocol import records as rec
from tests.log.logtools import (
    assert_dense_and_valid,
    open_descriptors,
    open_descriptors_to_deleted_files,
    stored_batches,
)

DAY = 24 * 3600 * 1000
NOW = 100 * DAY

# ---------------------------------------------------------------- the policy


def _segments(*pairs):
    """(size, age in days) per segment, oldest first; the last is the active one."""
    return [SegmentSummary(i * 100, size, NOW - int(age * DAY)) for i, (size, age) in enumerate(pairs)]


@pytest.mark.parametrize(
    ("retention_ms", "retention_bytes", "segments", "expected"),
    [
        (7 * DAY, -1, [(10, 9), (10, 8), (10, 6), (10, 1)], 2),  # older than 7 days
        (7 * DAY, -1, [(10, 9), (10, 3), (10, 8), (10, 1)], 1),  # a prefix only: stops at the first young one
        (7 * DAY, -1, [(10, 9), (10, 9), (10, 9)], 2),  # never the active segment, however old
        (7 * DAY, -1, [(10, 7)], 0),  # exactly retention.ms old: kept
        (-1, -1, [(10, 900), (10, 900)], 0),  # -1 keeps everything
        (-1, 30, [(10, 0), (10, 0), (10, 0), (10, 0)], 1),  # 40 bytes: dropping one leaves exactly 30
        (-1, 25, [(10, 0), (10, 0), (10, 0), (10, 0)], 1),  # dropping two would leave less than 25 (Kafka's rule)
        (-1, 20, [(10, 0), (10, 0), (10, 0), (10, 0)], 2),
        (-1, 0, [(10, 0), (10, 0), (10, 0)], 2),  # never the active segment
        (-1, 100, [(10, 0), (10, 0)], 0),
        (7 * DAY, 35, [(10, 9), (10, 0), (10, 0), (10, 0)], 1),  # both: the larger prefix wins
        (7 * DAY, 5, [(10, 9), (10, 0), (10, 0), (10, 0)], 3),
    ],
)
def test_expired_prefix(retention_ms, retention_bytes, segments, expected):
    config = LogConfig(retention_ms=retention_ms, retention_bytes=retention_bytes)
    assert expired_prefix(_segments(*segments), config, NOW) == expected


def test_a_segment_without_timestamps_is_expired_by_time():
    config = LogConfig(retention_ms=DAY)
    assert expired_prefix([SegmentSummary(0, 10, -1), SegmentSummary(1, 0, -1)], config, NOW) == 1


# ---------------------------------------------------------------- in a partition


def _fill(p: Partition, days: list[int], per_segment: int = 3) -> list[int]:
    """per_segment batches stamped NOW - days[i] for each i, one segment each; returns the bases."""
    for age in days:
        for _ in range(per_segment):
            p.append(rec.build_batch([rec.Record(b"x" * 100, timestamp=NOW - age * DAY)]))
        p.roll()
    return p.segment_bases()


@pytest.fixture
def cfg():
    return LogConfig(segment_index_bytes=1024, retention_ms=7 * DAY)


def test_retention_by_time_deletes_old_segments_and_advances_the_log_start(open_partition, cfg):
    p = open_partition(cfg=cfg)
    bases = _fill(p, [30, 20, 8, 5, 1])
    assert p.apply_retention(NOW) == 3
    assert p.segment_bases() == bases[3:]
    assert p.log_start_offset == bases[3]
    assert sorted(os.listdir(p.directory)) == sorted(
        ["partition.state"] + [segment_file(p.directory, b, s).name for b in bases[3:]
                                       for s in (".log", ".index", ".timeindex")]
        # producer state snapshots of each roll; of those before the log start only the newest stays
        + [segment_file(p.directory, b, ".snapshot").name for b in bases[2:]]
    )
    with pytest.raises(OffsetOutOfRange):
        p.read(bases[3] - 1, 100)
    assert p.read(bases[3], 100).slice.size > 0
    assert p.apply_retention(NOW) == 0
    assert_dense_and_valid(p.directory, start=bases[3])


def test_retention_uses_the_largest_timestamp_of_a_segment(open_partition, cfg):
    p = open_partition(cfg=cfg)
    p.append(rec.build_batch([rec.Record(b"old", timestamp=NOW - 30 * DAY)]))
    p.append(rec.build_batch([rec.Record(b"new", timestamp=NOW - 1 * DAY)]))
    p.append(rec.build_batch([rec.Record(b"old", timestamp=NOW - 30 * DAY)]))
    p.roll()
    p.append(rec.build_batch([rec.Record(b"active", timestamp=NOW)]))
    assert p.apply_retention(NOW) == 0
    assert p.apply_retention(NOW + 7 * DAY) == 1


def test_retention_never_deletes_the_active_segment(open_partition, cfg):
    p = open_partition(cfg=cfg)
    for _ in range(5):
        p.append(rec.build_batch([rec.Record(b"x", timestamp=NOW - 100 * DAY)]))
    assert p.apply_retention(NOW) == 0
    assert p.log_end_offset == 5 and p.log_start_offset == 0


def test_retention_by_size_keeps_the_partition_under_retention_bytes(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=1000, segment_index_bytes=1024, retention_bytes=3000,
                                     retention_ms=-1))
    for i in range(60):
        p.append(rec.build_batch([rec.Record(b"%d" % i + b"." * 150, timestamp=NOW)]))
    sizes = [os.path.getsize(segment_file(p.directory, b, ".log")) for b in p.segment_bases()]
    deleted = p.apply_retention(NOW)
    assert deleted > 0
    assert sum(sizes[deleted:]) >= 3000 > sum(sizes[deleted + 1 :])  # at least retention.bytes stay, as in Kafka
    assert p.size_bytes() == sum(sizes[deleted:])
    assert p.log_start_offset == p.segment_bases()[0]


def test_a_reader_holding_a_slice_of_a_deleted_segment_can_still_read_it(open_partition, cfg):
    p = open_partition(cfg=cfg)
    _fill(p, [30, 1])
    piece = p.read(0, 10**6).slice
    expected = segment_file(p.directory, 0, ".log").read_bytes()
    assert p.apply_retention(NOW) == 1
    assert not segment_file(p.directory, 0, ".log").exists()
    assert piece.read() == expected
    with open(os.devnull, "wb") as sink:  # what a processor does with it
        assert os.sendfile(sink.fileno(), piece.fileno(), piece.position, piece.size) == piece.size


def test_another_partition_object_notices_the_deletion(open_partition, cfg):
    p = open_partition(cfg=cfg)
    other = open_partition(recover=False)
    bases = _fill(p, [30, 20, 1])
    other.read(0, 100)
    p.apply_retention(NOW)
    assert other.log_start_offset == bases[2]
    assert other.segment_bases() == bases[2:]
    with pytest.raises(OffsetOutOfRange):
        other.read(0, 100)
    assert other.read(bases[2], 100).slice.read() == p.read(bases[2], 100).slice.read()
    other.append(rec.build_batch([rec.Record(b"y", timestamp=NOW)]))


def _read_after_retention(directory, config, conn):
    """In another process: attach, read offset 0, wait for the parent's retention, read again."""
    p = Partition(directory, config, recover=False)
    conn.send(len(p.read(0, 100).slice.read()))
    conn.recv()
    try:
        p.read(0, 100)
        conn.send("read below the log start")
    except OffsetOutOfRange:
        conn.send(("out of range", p.log_start_offset, p.segment_bases()))
    p.close()


def test_another_process_notices_the_deletion(open_partition, cfg):
    p = open_partition(cfg=cfg)
    bases = _fill(p, [30, 1])
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_read_after_retention, args=(p.directory, cfg, theirs))
    child.start()
    try:
        assert ours.poll(20) and ours.recv() > 0
        assert p.apply_retention(NOW) == 1
        ours.send("go")
        assert ours.poll(20) and ours.recv() == ("out of range", bases[1], bases[1:])
    finally:
        child.join(20)
    assert child.exitcode == 0


def test_retention_closes_what_it_deletes(open_partition, cfg):
    p = open_partition(cfg=cfg)
    _fill(p, [30] * 20 + [1], per_segment=1)
    for offset in range(p.log_end_offset):
        p.read(offset, 10)
    assert p.apply_retention(NOW) == 20
    gc.collect()
    assert open_descriptors_to_deleted_files(p.directory) == []


def test_delete_records_and_truncation_close_what_they_delete(open_partition, cfg):
    p = open_partition(cfg=cfg)
    bases = _fill(p, [1] * 10, per_segment=1)
    p.truncate_to(bases[5])
    p.delete_records_before(bases[3])
    gc.collect()
    assert open_descriptors_to_deleted_files(p.directory) == []
    assert [b.base_offset for b in stored_batches(p.directory)] == bases[3:5]


# ---------------------------------------------------------------- older segments open one at a time


def test_a_reader_keeps_the_active_segment_and_one_older_one_open_however_many_it_reads(open_partition, cfg):
    """Opening maps the active segment only; reading history opens each older segment in turn and closes the
    one before, so a partition costs a process the same descriptors with 2 segments or 50."""
    p = open_partition(cfg=cfg)
    bases = _fill(p, [1] * 12, per_segment=2)
    log_dir = p.directory.parent
    before = open_descriptors(log_dir)
    reader = open_partition(recover=False)
    attached = open_descriptors(log_dir) - before
    assert attached == DESCRIPTORS_PER_PARTITION  # the state page, the lock and the active segment
    values = []
    offset = 0
    while offset < reader.log_end_offset:
        got = reader.read(offset, 10**6)
        data = got.slice.read()
        values += [r.value for pos, _ in rec.iter_batches(data) for r in rec.decode_records(data, pos)]
        offset = got.upper_bound  # the slice holds its segment whole: the next read starts at the next one
        assert open_descriptors(log_dir) - before <= attached + 5  # + one older segment: its log, two index mappings
    assert len(bases) == 13 and values == [b"x" * 100] * 24
    assert reader.lookup_timestamp(NOW - DAY) == (0, NOW - DAY)


def test_retention_between_a_readers_snapshot_and_its_opening_an_older_segment_is_out_of_range(open_partition, cfg):
    p = open_partition(cfg=cfg)
    bases = _fill(p, [30, 20, 1])
    reader = open_partition(recover=False)
    real, raced = reader.snapshot, []

    def snapshot_then_retention():
        snap = real()  # the segments listed, none older opened
        if not raced:
            raced.append(p.apply_retention(NOW))  # segments 0 and 1 go now
        return snap

    reader.snapshot = snapshot_then_retention
    with pytest.raises(OffsetOutOfRange):
        reader.read(0, 100)
    assert raced == [2] and reader.segment_bases() == bases[2:]
    assert reader.read(bases[2], 100).slice.read() == p.read(bases[2], 100).slice.read()
