"""A partition log: appends, reads, index and time lookups against brute-force oracles over the files."""

from __future__ import annotations

import bisect
import gzip
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmlog.config.settings import LogConfig
from mmlog.errors import (
    CorruptMessage,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
    UnknownTopicOrPartition,
)
from mmlog.log import rolled_flush
from mmlog.log.files import segment_bases, segment_file
from mmlog.log.lock import EPOCH_FILE, LOCKS_FILE
from mmlog.log.partition import Partition
from mmlog.log.segment_view import now_ms
from mmlog.log.state import PartitionState
from mmlog.log.touched import BOARD_FILE
from mmlog.protocol import records as rec
from tests.log.logtools import (
    StoredBatch,
    assert_dense_and_valid,
    check_indexes,
    stored_batches,
    tagged_batch,
    tags_of,
)

# ---------------------------------------------------------------- oracles


def check_reads(p: Partition, batches: list[StoredBatch], max_bytes: int) -> None:
    """A read at every offset starts at the batch holding it, whole, and stays inside its segment."""
    files = {base: segment_file(p.directory, base, ".log").read_bytes() for base in segment_bases(p.directory)}
    starts = [b.base_offset for b in batches]
    log_start, hwm = p.log_start_offset, p.high_watermark
    for offset in range(log_start, hwm):
        b = batches[bisect.bisect_right(starts, offset) - 1]
        read = p.read(offset, max_bytes)
        piece = read.slice
        assert (piece.position, read.high_watermark, read.log_start_offset) == (b.position, hwm, log_start)
        assert piece.size == min(len(files[b.segment]) - b.position, max(max_bytes, b.header.size))
        data = piece.read()
        assert data[: b.header.size] == b.data
        assert data == files[b.segment][b.position : b.position + piece.size]


def consume(p: Partition, start: int, max_bytes: int) -> list[bytes]:
    """Read like a consumer: whole batches from each slice, then on from the next offset."""
    out, offset = [], start
    while offset < p.high_watermark:
        data = p.read(offset, max_bytes).slice.read()
        got = list(rec.iter_batches(data))
        assert got, "a read made no progress"
        for pos, h in got:
            if h.last_offset >= offset:
                out.append(data[pos : pos + h.size])
            offset = h.next_offset
    return out


def expected_time_answer(p: Partition, target: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record from the log start on that reaches target, from the decoded files.

    A compressed batch is looked up as a whole: its base offset (or the log start) and its
    largest timestamp, if that reaches the target.
    """
    start = p.log_start_offset
    for b in stored_batches(p.directory):
        if b.last_offset < start or b.header.max_timestamp < target:
            continue
        if b.header.compression:
            return max(b.base_offset, start), b.header.max_timestamp
        records = rec.decode_records(b.data)
        found = next(((r.offset, r.timestamp) for r in records if r.timestamp >= target and r.offset >= start), None)
        if found is not None:
            return found
    return None


def check_time_lookups(p: Partition, stamps: set[int]) -> None:
    for target in sorted({t + d for t in stamps for d in (-1, 0, 1)} | {0, 2_000_000}):
        expected = expected_time_answer(p, target)
        assert p.lookup_timestamp(target) == expected, target
        assert p.offset_for_timestamp(target) == (None if expected is None else expected[0]), target


# ---------------------------------------------------------------- random batches, read back


header_st = st.tuples(st.sampled_from(["a", "b", "trace"]), st.one_of(st.none(), st.binary(max_size=6)))
record_st = st.builds(
    rec.Record,
    value=st.one_of(st.none(), st.binary(max_size=30), st.binary(min_size=100, max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=12)),
    headers=st.lists(header_st, max_size=2),
    timestamp=st.integers(1_000_000, 1_010_000),  # not monotonic across records or batches
)
batches_st = st.lists(st.tuples(st.lists(record_st, min_size=1, max_size=3), st.sampled_from([0, 0, 0, 1])),
                      min_size=15, max_size=60)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches_st, st.sampled_from([1100, 2000, 4000]), st.sampled_from([0, 100, 600]), st.integers(1, 3000), st.data())
def test_random_batches_read_back_byte_exact_across_segment_rolls(batch_specs, segment_bytes, interval, max_bytes,
                                                                  data):
    cfg = LogConfig(segment_bytes=segment_bytes, segment_index_bytes=2048, index_interval_bytes=interval)
    with tempfile.TemporaryDirectory() as tmp:
        p = Partition(Path(tmp) / "t-0", cfg)
        appended = []
        for recs, compression in batch_specs:
            buf = rec.build_batch(recs, compression=compression)
            info = p.append(buf)
            assert (info.base_offset, info.records, info.batches) == (p.log_end_offset - len(recs), len(recs), 1)
            assert rec.read_header(buf).base_offset == info.base_offset  # assigned in the caller's buffer
            appended.append(bytes(buf))
        batches = assert_dense_and_valid(p.directory, start=0)
        assert [b.data for b in batches] == appended
        assert p.log_end_offset == p.high_watermark == sum(len(recs) for recs, _ in batch_specs)
        assert all(os.path.getsize(segment_file(p.directory, b, ".log")) <= segment_bytes for b in p.segment_bases())
        check_indexes(p)
        check_reads(p, batches, 1)
        check_reads(p, batches, max_bytes)
        assert p.read(p.high_watermark, max_bytes).slice.size == 0
        with pytest.raises(OffsetOutOfRange):
            p.read(p.high_watermark + 1, max_bytes)
        assert consume(p, 0, max_bytes) == appended
        stamps = {r.timestamp for recs, _ in batch_specs for r in recs}
        check_time_lookups(p, stamps)

        start = data.draw(st.integers(0, p.high_watermark), label="delete records before")
        p.delete_records_before(start)
        assert p.log_start_offset == start
        if start:
            with pytest.raises(OffsetOutOfRange):
                p.read(start - 1, max_bytes)
        check_reads(p, [b for b in batches if b.segment in p.segment_bases()], max_bytes)
        first = next((i for i, b in enumerate(batches) if b.last_offset >= start), len(batches))
        assert consume(p, start, max_bytes) == appended[first:]
        check_time_lookups(p, stamps)
        p.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches_st, st.sampled_from([1100, 2000, 4000]), st.sampled_from([0, 100, 600]), st.data())
def test_append_many_writes_what_appending_one_by_one_writes(batch_specs, segment_bytes, interval, data):
    """Group commit is an optimisation only: the same files, indexes and offsets as one append per buffer,
    with the corrupt buffers of a group refused alone, whatever the groups and the rolls inside them."""
    cfg = LogConfig(segment_bytes=segment_bytes, segment_index_bytes=2048, index_interval_bytes=interval)
    bufs = [bytes(rec.build_batch(recs, compression=c)) for recs, c in batch_specs]
    bad = data.draw(st.sets(st.integers(0, len(bufs) - 1), max_size=4), label="corrupt buffers")
    bufs = [b[:-1] + bytes([b[-1] ^ 1]) if i in bad else b for i, b in enumerate(bufs)]
    with tempfile.TemporaryDirectory() as tmp:
        grouped, single = Partition(Path(tmp) / "g-0", cfg), Partition(Path(tmp) / "s-0", cfg)
        i = 0
        while i < len(bufs):
            n = data.draw(st.integers(1, 12), label="group size")
            group = bufs[i:i + n]
            outcomes = grouped.append_many([bytearray(b) for b in group])
            assert len(outcomes) == len(group)
            for j, (buf, outcome) in enumerate(zip(group, outcomes)):
                if i + j in bad:
                    assert isinstance(outcome, CorruptMessage)
                else:
                    assert outcome == single.append(bytearray(buf))
            i += n
        assert grouped.segment_bases() == single.segment_bases()
        for base in grouped.segment_bases():
            assert segment_file(grouped.directory, base, ".log").read_bytes() == \
                segment_file(single.directory, base, ".log").read_bytes()
        assert grouped.log_end_offset == grouped.high_watermark == single.log_end_offset
        assert_dense_and_valid(grouped.directory, start=0)
        check_indexes(grouped)
        grouped.close()
        single.close()


# ---------------------------------------------------------------- appending


def test_append_assigns_consecutive_offsets_and_reports_where_the_batches_went(open_partition):
    p = open_partition()
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (0, 0, 0)
    first = p.append(tagged_batch("a", records=3))
    second = p.append(tagged_batch("b", records=2))
    assert (first.base_offset, first.last_offset, first.records) == (0, 2, 3)
    assert (second.base_offset, second.last_offset, second.log_start_offset) == (3, 4, 0)
    assert p.log_end_offset == p.high_watermark == 5


def test_one_append_may_carry_several_batches(open_partition):
    p = open_partition()
    p.append(tagged_batch("x"))
    buf = tagged_batch("a", records=2) + tagged_batch("b", records=3)
    info = p.append(buf)
    assert (info.base_offset, info.last_offset, info.batches, info.records) == (1, 5, 2, 5)
    assert [h.base_offset for h in rec.validate_batches(buf)] == [1, 3]
    assert [b.base_offset for b in assert_dense_and_valid(p.directory)] == [0, 1, 3]


def test_append_many_gives_each_buffer_its_offsets_or_its_error(open_partition, config):
    p = open_partition(cfg=LogConfig.from_props({"max.message.bytes": 300}, config))
    bad = tagged_batch("bad")
    bad[-1] ^= 1
    group = [tagged_batch("a", records=2), bad, tagged_batch("big", pad=400), tagged_batch("b"),
             tagged_batch("c", records=3)]
    outcomes = p.append_many(group)
    assert [(o.base_offset, o.last_offset) for o in (outcomes[0], outcomes[3], outcomes[4])] == [(0, 1), (2, 2), (3, 5)]
    assert isinstance(outcomes[1], CorruptMessage) and isinstance(outcomes[2], MessageTooLarge)
    assert [tags_of(b.data) for b in assert_dense_and_valid(p.directory, start=0)] == ["a", "b", "c"]
    [alone] = p.append_many([bad])  # a group of nothing valid writes nothing
    assert isinstance(alone, CorruptMessage) and p.log_end_offset == 6


def test_a_corrupt_batch_is_refused_and_nothing_is_written(open_partition):
    p = open_partition()
    p.append(tagged_batch("ok"))
    bad = tagged_batch("bad")
    bad[-1] ^= 1
    with pytest.raises(CorruptMessage):
        p.append(bad)
    with pytest.raises(CorruptMessage):
        p.append(bytearray(tagged_batch("cut")[:-3]))
    assert p.log_end_offset == 1 and len(stored_batches(p.directory)) == 1


def test_a_batch_above_max_message_bytes_is_refused(open_partition, config):
    p = open_partition(cfg=LogConfig.from_props({"max.message.bytes": 200}, config))
    p.append(tagged_batch("small"))
    with pytest.raises(MessageTooLarge):
        p.append(tagged_batch("big", pad=300))
    assert p.log_end_offset == 1


def test_a_record_list_larger_than_a_segment_is_refused(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=1000, max_message_bytes=800))
    with pytest.raises(RecordListTooLarge):
        p.append(tagged_batch("a", pad=600) + tagged_batch("b", pad=600))
    assert p.log_end_offset == 0


# ---------------------------------------------------------------- rolling


def test_a_batch_that_would_overflow_segment_bytes_goes_to_a_new_segment(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=1000, segment_index_bytes=1024))
    for i in range(30):
        p.append(tagged_batch(f"b{i}", pad=(i * 37) % 300))
    bases = p.segment_bases()
    assert len(bases) > 5
    batches = stored_batches(p.directory)
    for i, base in enumerate(bases[:-1]):
        size = os.path.getsize(segment_file(p.directory, base, ".log"))
        nxt = next(b for b in batches if b.segment == bases[i + 1])
        assert size <= 1000 < size + nxt.header.size
        assert nxt.base_offset == bases[i + 1]


def test_a_batch_as_large_as_a_segment_gets_one_to_itself(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=1000, segment_index_bytes=1024))
    p.append(tagged_batch("small"))
    pad = 1000 - len(tagged_batch("big"))
    while len(tagged_batch("big", pad=pad)) > 1000:  # the record's length varints grow too
        pad -= 1
    big = tagged_batch("big", pad=pad)
    assert len(big) == 1000
    p.append(big)
    p.append(tagged_batch("after"))
    assert p.segment_bases() == [0, 1, 2]


def test_maybe_roll_rolls_an_active_segment_older_than_segment_ms(open_partition):
    p = open_partition(cfg=LogConfig(segment_ms=300, segment_index_bytes=1024))
    assert not p.maybe_roll()  # an empty active segment never rolls
    p.append(tagged_batch("a"))
    assert not p.maybe_roll()
    time.sleep(0.35)
    assert p.maybe_roll()
    assert p.segment_bases() == [0, 1]
    assert not p.maybe_roll()  # empty again: its clock starts at its first batch
    p.append(tagged_batch("b"))
    time.sleep(0.35)
    p.append(tagged_batch("c"))  # an append past segment.ms rolls too
    assert p.segment_bases() == [0, 1, 2]


def test_a_full_index_rolls_the_segment(open_partition):
    cfg = LogConfig(segment_index_bytes=64, index_interval_bytes=0)  # 8 offset entries, 4 time entries
    p = open_partition(cfg=cfg)
    for i in range(40):
        p.append(rec.build_batch([rec.Record(b"v", timestamp=1000 + i)]))
    bases = p.segment_bases()
    assert len(bases) >= 10
    for base in bases[:-1]:
        assert os.path.getsize(segment_file(p.directory, base, ".index")) <= 64
        assert os.path.getsize(segment_file(p.directory, base, ".timeindex")) <= 64
    check_indexes(p)
    check_reads(p, stored_batches(p.directory), 1)
    assert [p.offset_for_timestamp(1000 + i) for i in range(41)] == [*range(40), None]


def test_offsets_that_would_overflow_a_relative_int32_roll_the_segment(open_partition):
    p = open_partition()
    p.append(tagged_batch("a"))
    body = bytearray()
    rec.encode_record(body, 0, 0, None, b"v")
    huge = rec._assemble(  # a compacted batch may skip offsets, so only its last delta counts: a follower
        gzip.compress(bytes(body)), base_offset=1, partition_leader_epoch=0, attributes=1,  # copies such batches
        last_offset_delta=2**31 - 1, base_timestamp=0, max_timestamp=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, records_count=1,
    )
    p.append_replica(huge)
    assert p.segment_bases() == [0, 1]
    p.append(tagged_batch("b"))
    assert p.log_end_offset == 2**31 + 2
    assert p.read(2**31 + 1, 1).slice.read()[:8] == (2**31 + 1).to_bytes(8, "big")


def test_roll_now_only_when_the_active_segment_holds_something(open_partition):
    p = open_partition()
    p.roll()
    assert p.segment_bases() == [0]
    p.append(tagged_batch("a"))
    p.roll()
    assert p.segment_bases() == [0, 1]


# ---------------------------------------------------------------- reading


def test_reads_outside_the_log_raise_offset_out_of_range(open_partition):
    p = open_partition()
    for i in range(5):
        p.append(tagged_batch(str(i)))
    p.delete_records_before(2)
    for offset in (-1, 0, 1, 6, 100):
        with pytest.raises(OffsetOutOfRange):
            p.read(offset, 1000)
    assert p.read(2, 1).slice.read()[:8] == (2).to_bytes(8, "big")


def test_a_read_at_the_high_watermark_is_empty(open_partition):
    p = open_partition()
    read = p.read(0, 100)
    assert (read.slice.size, read.high_watermark, read.log_end_offset) == (0, 0, 0)
    p.append(tagged_batch("a", records=3))
    read = p.read(3, 100)
    assert read.slice.size == 0 and read.slice.read() == b"" and read.high_watermark == 3


def test_the_first_batch_comes_whole_even_when_larger_than_max_bytes(open_partition):
    p = open_partition()
    big = tagged_batch("big", records=5, pad=200)
    p.append(big)
    p.append(tagged_batch("next"))
    for offset in range(5):
        assert p.read(offset, 10).slice.read() == bytes(big)


def test_max_bytes_may_cut_the_last_batch_of_a_slice(open_partition):
    p = open_partition()
    for i in range(4):
        p.append(tagged_batch(str(i), pad=50))
    first, second = p.read(0, 1).slice.read(), p.read(1, 1).slice.read()
    data = p.read(0, len(first) + 30).slice.read()
    assert data == first + second[:30]
    assert [pos for pos, _ in rec.iter_batches(data)] == [0]  # a partial tail, as Kafka's fetch may end with


def test_a_read_never_crosses_into_the_next_segment(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=500, segment_index_bytes=1024))
    for i in range(20):
        p.append(tagged_batch(str(i), pad=60))
    bases = p.segment_bases()
    size0 = os.path.getsize(segment_file(p.directory, 0, ".log"))
    assert p.read(0, 10**6).slice.size == size0
    tail = p.read(bases[1] - 1, 10**6).slice
    assert tail.position > 0 and tail.position + tail.size == size0  # ends with its segment
    assert p.read(bases[1], 10**6).slice.position == 0


def test_an_attached_process_sees_appends_at_once(open_partition):
    owner = open_partition()
    reader = open_partition(recover=False)
    owner.append(tagged_batch("a"))
    assert reader.high_watermark == 1
    assert reader.read(0, 100).slice.read() == owner.read(0, 100).slice.read()
    reader.append(tagged_batch("b"))
    assert owner.log_end_offset == 2


def test_attaching_to_a_partition_nobody_opened_fails(tmp_path):
    with pytest.raises(UnknownTopicOrPartition):
        Partition(tmp_path / "nothing-0", recover=False)


def test_size_bytes_sums_the_committed_segment_bytes(open_partition):
    p = open_partition()
    for i in range(30):
        p.append(tagged_batch(str(i), pad=100))
    assert len(p.segment_bases()) > 1
    assert p.size_bytes() == sum(len(b.data) for b in stored_batches(p.directory))


# ---------------------------------------------------------------- time lookups


def test_offset_for_timestamp_with_timestamps_going_back_and_forth(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=400, segment_index_bytes=1024, index_interval_bytes=0))
    stamps = [50, 10, 70, 20, 90, 30, 60, 100, 5, 80]
    for i in range(0, len(stamps), 2):
        p.append(rec.build_batch([rec.Record(b"x" * 40, timestamp=t) for t in stamps[i : i + 2]]))
    assert len(p.segment_bases()) > 1
    for target in range(0, 110, 5):
        assert p.offset_for_timestamp(target) == next((o for o, t in enumerate(stamps) if t >= target), None)


def test_offset_for_timestamp_never_answers_below_the_log_start(open_partition):
    p = open_partition()
    p.append(rec.build_batch([rec.Record(b"a", timestamp=100), rec.Record(b"b", timestamp=0),
                              rec.Record(b"c", timestamp=0)]))
    p.append(rec.build_batch([rec.Record(b"d", timestamp=0), rec.Record(b"e", timestamp=100)]))
    p.delete_records_before(1)
    assert p.offset_for_timestamp(0) == 1
    assert p.offset_for_timestamp(50) == 4
    assert p.offset_for_timestamp(101) is None
    assert (p.lookup_timestamp(0), p.lookup_timestamp(50)) == ((1, 0), (4, 100))  # the records' own timestamps


def test_offset_for_timestamp_of_an_empty_log_is_none(open_partition):
    assert open_partition().offset_for_timestamp(0) is None


# ---------------------------------------------------------------- flushing


def test_flush_moves_the_recovery_point_to_the_log_end(open_partition):
    p = open_partition()
    for i in range(3):
        p.append(tagged_batch(str(i)))
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (0, 3)
    p.flush()
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (3, 0)


def test_flush_messages_flushes_every_n_messages(open_partition):
    p = open_partition(cfg=LogConfig(flush_messages=4, segment_index_bytes=1024))
    for i in range(10):
        p.append(tagged_batch(str(i)))
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (8, 2)


def test_maybe_flush_flushes_once_flush_ms_has_passed(open_partition):
    p = open_partition(cfg=LogConfig(flush_ms=300, segment_index_bytes=1024))
    assert not p.maybe_flush()  # nothing pending
    p.append(tagged_batch("a"))
    assert not p.maybe_flush()
    time.sleep(0.35)
    assert p.maybe_flush()
    assert p.state.snapshot().recovery_point == 1


def test_flush_ms_counts_from_the_oldest_unflushed_message_and_only_the_flush_timer_fsyncs(open_partition):
    # An fsync in an append would stall every connection of the appending processor: as Kafka's flush.ms,
    # only the timer (maybe_flush) acts on it.
    p = open_partition(cfg=LogConfig(flush_ms=200, segment_index_bytes=1024))
    time.sleep(0.25)  # idle for longer than flush.ms
    p.append(tagged_batch("a"))
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (0, 1)
    assert not p.maybe_flush()  # the oldest unflushed message is younger than flush.ms
    time.sleep(0.25)
    p.append(tagged_batch("b"))  # the oldest unflushed one is older than flush.ms: still no fsync here
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (0, 2)
    assert p.maybe_flush()
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (2, 0)


def _during_the_fsyncs(monkeypatch, action) -> None:
    """Run action() in another thread while flush() syncs its first segment's files (once: a roll's own
    flusher thread syncs through the same function), and wait for it (5 s at most)."""
    real, pending = rolled_flush.sync_files, [action]

    def sync_files(directory, base):
        if not pending:
            return real(directory, base)
        worker = threading.Thread(target=pending.pop())
        worker.start()
        worker.join(5)
        assert not worker.is_alive(), "the flush held the partition lock while it synced"
        real(directory, base)

    monkeypatch.setattr(rolled_flush, "sync_files", sync_files)


def test_a_flush_syncs_outside_the_lock_and_claims_only_what_was_appended_before_it(open_partition, monkeypatch):
    p = open_partition(cfg=LogConfig(segment_index_bytes=1024))
    for i in range(3):
        p.append(tagged_batch(str(i)))
    started = now_ms()
    _during_the_fsyncs(monkeypatch, lambda: p.append(tagged_batch("during")))
    p.flush()
    snap = p.state.snapshot()
    assert (snap.log_end, snap.recovery_point, snap.unflushed) == (4, 3, 1)
    assert snap.flushed_at_ms <= started + 1  # the one left is no older than the flush's start: due by then
    monkeypatch.undo()
    p.flush()
    snap = p.state.snapshot()
    assert (snap.recovery_point, snap.unflushed) == (4, 0)


def test_a_segment_set_changed_during_the_fsyncs_is_flushed_again_under_the_lock(open_partition, monkeypatch):
    p = open_partition(cfg=LogConfig(segment_index_bytes=1024))
    for i in range(3):
        p.append(tagged_batch(str(i)))

    def roll_and_append():
        p.roll()
        p.append(tagged_batch("in the new segment"))

    _during_the_fsyncs(monkeypatch, roll_and_append)
    p.flush()
    snap = p.state.snapshot()
    assert (snap.active_base, snap.log_end, snap.recovery_point, snap.unflushed) == (3, 4, 4, 0)


def test_a_flush_meeting_a_truncation_claims_nothing_of_what_was_written_after_it(open_partition, monkeypatch):
    p = open_partition(cfg=LogConfig(segment_index_bytes=1024))
    for i in range(4):
        p.append(tagged_batch(str(i)))

    def truncate_and_write_again():
        p.truncate_to(2)
        for i in range(3):
            p.append(tagged_batch(f"again {i}"))

    _during_the_fsyncs(monkeypatch, truncate_and_write_again)
    p.flush()  # the generation moved: flushed under the lock, so the claim covers the new bytes too
    snap = p.state.snapshot()
    assert (snap.log_end, snap.recovery_point, snap.unflushed) == (5, 5, 0)


# ---------------------------------------------------------------- truncation and deleting records


def test_truncate_to_removes_the_batch_holding_the_offset_and_everything_after(open_partition):
    p = open_partition()
    for i in range(60):
        p.append(tagged_batch(f"b{i}", records=2, pad=100))
    bases = p.segment_bases()
    assert len(bases) >= 4
    before = stored_batches(p.directory)
    target = bases[1] + 3  # inside the second batch of the second segment
    p.truncate_to(target)
    kept = [b for b in before if b.last_offset < bases[1] + 2]
    assert [b.data for b in assert_dense_and_valid(p.directory, start=0)] == [b.data for b in kept]
    assert p.log_end_offset == p.high_watermark == bases[1] + 2
    assert p.segment_bases() == bases[:2]
    check_indexes(p)
    assert p.append(tagged_batch("new")).base_offset == bases[1] + 2
    with pytest.raises(OffsetOutOfRange):
        p.read(bases[1] + 4, 100)


def test_truncate_to_the_log_end_or_beyond_changes_nothing(open_partition):
    p = open_partition()
    p.append(tagged_batch("a", records=3))
    p.truncate_to(3)
    p.truncate_to(99)
    assert p.log_end_offset == 3


def test_truncate_to_a_segment_base_empties_that_segment(open_partition):
    p = open_partition()
    for i in range(40):
        p.append(tagged_batch(str(i), pad=300))
    bases = p.segment_bases()
    p.truncate_to(bases[2])
    assert p.segment_bases() == bases[:3] and p.log_end_offset == bases[2]
    assert os.path.getsize(segment_file(p.directory, bases[2], ".log")) == 0
    p.append(tagged_batch("again"))
    check_indexes(p)


def test_truncate_below_the_log_start_is_refused(open_partition):
    p = open_partition()
    for i in range(4):
        p.append(tagged_batch(str(i)))
    p.delete_records_before(2)
    with pytest.raises(OffsetOutOfRange):
        p.truncate_to(1)


def test_another_process_reads_the_new_data_after_a_truncation_and_regrowth(open_partition):
    p = open_partition()
    other = open_partition(recover=False)
    for i in range(60):
        p.append(tagged_batch(f"old{i}", pad=200))
    bases = p.segment_bases()
    assert len(bases) >= 4
    for offset in range(p.log_end_offset):
        other.read(offset, 1)  # the other process has every segment open
    p.truncate_to(bases[1] + 1)
    n = 0
    while p.log_end_offset < bases[-1] + 2:  # regrow over the same base offsets
        p.append(tagged_batch(f"new{n}", pad=200))
        n += 1
    assert p.segment_bases()[: len(bases)] == bases
    for offset in range(bases[1], p.log_end_offset):
        assert other.read(offset, 1).slice.read() == p.read(offset, 1).slice.read()
    for offset in range(p.log_end_offset):
        other.read(offset, 1)
    other.append(tagged_batch("from-the-other"))
    assert_dense_and_valid(p.directory, start=0)


def test_delete_records_before_advances_the_log_start_and_drops_whole_segments(open_partition):
    p = open_partition()
    for i in range(60):
        p.append(tagged_batch(str(i), pad=300))
    bases = p.segment_bases()
    target = bases[2] + 1
    assert p.delete_records_before(target) == target
    assert p.log_start_offset == target
    assert p.segment_bases() == bases[2:]
    with pytest.raises(OffsetOutOfRange):
        p.read(target - 1, 100)
    assert p.read(target, 1).slice.read()[:8] == target.to_bytes(8, "big")
    assert p.delete_records_before(3) == target  # never backwards
    with pytest.raises(OffsetOutOfRange):
        p.delete_records_before(p.high_watermark + 1)
    assert p.delete_records_before(p.high_watermark) == p.high_watermark
    assert p.segment_bases() == [bases[-1]]
    assert p.read(p.high_watermark, 100).slice.size == 0
    p.append(tagged_batch("after"))


def test_log_start_survives_a_reopen(open_partition, partition_dir, config):
    p = open_partition()
    for i in range(10):
        p.append(tagged_batch(str(i)))
    p.delete_records_before(4)
    p.close()
    q = open_partition()
    assert (q.log_start_offset, q.log_end_offset) == (4, 10)
    q.close(clean=False)
    r = open_partition()
    assert (r.log_start_offset, r.log_end_offset) == (4, 10)


# ---------------------------------------------------------------- closing and deleting


def test_a_clean_close_flushes_and_marks_the_state(open_partition, partition_dir):
    p = open_partition()
    p.append(tagged_batch("a", records=3))
    p.close()
    state = PartitionState(partition_dir)
    snap = state.snapshot()
    assert (snap.clean, snap.recovery_point, snap.unflushed, snap.pending_op) == (1, 3, 0, 0)
    q = open_partition()
    assert not q.recovered and q.log_end_offset == 3 and state.snapshot().clean == 0
    state.close()


def test_an_attached_process_closing_does_not_mark_the_partition_clean(open_partition):
    owner = open_partition()
    attached = open_partition(recover=False)
    attached.append(tagged_batch("a"))
    attached.close()
    assert owner.state.snapshot().clean == 0 and owner.log_end_offset == 1


def test_a_partition_used_as_a_context_manager_closes_cleanly(partition_dir, config, open_partition):
    with Partition(partition_dir, config) as p:
        p.append(tagged_batch("a"))
    q = open_partition()
    assert q.recovered_notes == [] and q.log_end_offset == 1


def test_delete_removes_the_directory_and_others_see_it_deleted(open_partition, partition_dir):
    p = open_partition()
    other = open_partition(recover=False)
    p.append(tagged_batch("a"))
    other.read(0, 10)
    p.delete()
    assert not partition_dir.exists() and sorted(os.listdir(partition_dir.parent)) == sorted([LOCKS_FILE, EPOCH_FILE, BOARD_FILE])  # the log dir's
    with pytest.raises(UnknownTopicOrPartition):
        other.read(0, 10)
    with pytest.raises(UnknownTopicOrPartition):
        other.append(tagged_batch("b"))
