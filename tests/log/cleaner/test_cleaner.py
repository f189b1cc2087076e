"""The log cleaner over real partition files: Kafka's compaction guarantees, batch by batch."""

from __future__ import annotations

import dataclasses

import os
import random
import shutil

import pytest

from mmlog.config.settings import LogConfig
from mmlog.log.cleaner import checkpoint as cleaner_checkpoint, kernels as compaction_kernels
from mmlog.log.cleaner.cleaner import CRASH_EXIT, CRASH_POINTS, Cleaner
from mmlog.log.cleaner.partition_files import first_dirty_offset
from mmlog.log.cleaner.offset_map import OffsetMap
from mmlog.log.partition import Partition
from mmlog.protocol import compression
from mmlog.protocol import records as rec
from tests.log.logtools import index_on_disk, stored_batches, time_index_on_disk

COMPACT = LogConfig(segment_bytes=2048, segment_index_bytes=1024, index_interval_bytes=256, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.0)


@pytest.fixture(scope="module", autouse=True)
def warm():
    compaction_kernels.warm()


def cleaner(memory: int = 1 << 20) -> Cleaner:
    return Cleaner(OffsetMap(memory), crash_at="")


def produce(p: Partition, pairs, compression_codec: int = 0, per_batch: int = 1) -> list[int]:
    """Append (key, value) pairs, `per_batch` to a batch; return each record's offset."""
    offsets = []
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i : i + per_batch]
        info = p.append(rec.build_batch(chunk, compression=compression_codec))
        offsets += range(info.base_offset, info.last_offset + 1)
    return offsets


def read_all(p: Partition) -> list[rec.Record]:
    """What a consumer reading from the log start gets, through Partition.read."""
    out, offset = [], p.log_start_offset
    while offset < p.high_watermark:
        data = p.read(offset, 1 << 20).slice.read()
        if not data:
            break
        for pos, h in rec.iter_batches(data):
            out += [r for r in rec.decode_records(data, pos) if r.offset >= offset]
            offset = h.last_offset + 1
    return out


def clean(p: Partition, c: Cleaner | None = None, now=None):
    p.roll()
    return (c or cleaner()).clean(p, first_dirty_offset(p.directory), now)


def check_cleaned_indexes(p: Partition) -> None:
    """Each index entry of an inactive segment points at a batch starting at its offset; time entries grow."""
    batches = stored_batches(p.directory)
    for base in p.segment_bases()[:-1]:
        at = {b.position: b.base_offset for b in batches if b.segment == base}
        for rel, pos in index_on_disk(p, base):
            assert at[pos] == base + rel
        times = time_index_on_disk(p, base)
        assert times == sorted(times)
        mine = [b for b in batches if b.segment == base]
        if mine:
            assert times and times[-1][0] == max(b.header.max_timestamp for b in mine)


def final_values(pairs, offsets) -> dict:
    latest = {}
    for (k, v), o in zip(pairs, offsets):
        latest[k] = (v, o)
    return latest


@pytest.fixture
def compacted(tmp_path):
    opened = []

    def _open(config=COMPACT):
        p = Partition(tmp_path / "t-0", config)
        opened.append(p)
        return p

    yield _open
    for p in opened:
        try:
            p.close()
        except ValueError:  # closed by the test already
            pass


@pytest.mark.parametrize("codec,per_batch", [(0, 1), (0, 5), (compression.GZIP, 5), (compression.ZSTD, 7)])
def test_a_consumer_from_the_start_sees_the_final_value_of_every_key_at_its_offset_in_order(compacted, codec,
                                                                                            per_batch):
    rng = random.Random(codec * 10 + per_batch)
    p = compacted()
    pairs = [(b"k%d" % rng.randrange(20), b"v%d" % i) for i in range(400)]
    offsets = produce(p, pairs, codec, per_batch)
    before = p.size_bytes()
    stats = clean(p)
    assert stats is not None and stats.records_kept < stats.records_read
    seen = read_all(p)
    want = final_values(pairs, offsets)
    got = {r.key: (r.value, r.offset) for r in seen}
    assert got == want
    assert [r.offset for r in seen] == sorted({o for _, o in want.values()})  # nothing else, in order
    assert p.size_bytes() < before / 4
    segments = len(p.segment_bases())
    extra = [(b"k0", b"last")]
    offsets += produce(p, extra)
    clean(p)  # cleaned segments now fit together (groups are sized by what they held before cleaning)
    assert len(p.segment_bases()) < segments
    assert {r.key: (r.value, r.offset) for r in read_all(p)} == final_values(pairs + extra, offsets)
    check_cleaned_indexes(p)


def test_a_second_cleaning_maps_only_the_dirty_part_and_keeps_offsets(compacted):
    p = compacted()
    pairs = [(b"k%d" % (i % 7), b"a%d" % i) for i in range(200)]
    offsets = produce(p, pairs)
    clean(p)
    more = [(b"k%d" % (i % 3), b"b%d" % i) for i in range(100)]
    offsets += produce(p, more)
    stats = clean(p)
    assert stats.first_dirty == 200
    got = {r.key: (r.value, r.offset) for r in read_all(p)}
    assert got == final_values(pairs + more, offsets)


def test_the_active_segment_and_records_above_the_high_watermark_are_never_touched(compacted):
    p = compacted()
    pairs = [(b"same", b"v%d" % i) for i in range(60)]
    produce(p, pairs)
    active = p.snapshot().active_base
    Cleaner(OffsetMap(1 << 20), crash_at="").clean(p, 0)
    assert [r.offset for r in read_all(p) if r.offset >= active] == list(range(active, 60))


def test_a_tombstone_is_stamped_with_a_delete_horizon_when_first_cleaned_and_goes_once_a_cleaning_passes_it(compacted):
    """KIP-534: the first cleaning that keeps a tombstone sets its batch's delete horizon (attributes bit
    6, base timestamp = now + delete.retention.ms, records keeping their timestamps); cleanings before
    the horizon keep it, the first one at or past it removes it."""
    p = compacted(dataclasses.replace(COMPACT, delete_retention_ms=60_000))
    pairs = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(100)]
    produce(p, pairs)
    deleted_at = p.append(rec.build_batch([(b"k1", None)], base_timestamp=1_000)).base_offset
    t0 = 1_800_000_000_000
    clean(p, now=t0)
    [tomb] = [b for b in stored_batches(p.directory) if b.base_offset == deleted_at]
    assert tomb.header.attributes & compaction_kernels.DELETE_HORIZON_BIT
    assert tomb.header.base_timestamp == t0 + 60_000
    [record] = [r for r in read_all(p) if r.offset == deleted_at]
    assert (record.key, record.value, record.timestamp) == (b"k1", None, 1_000)  # a consumer now sees the delete
    produce(p, [(b"k2", b"later%d" % i) for i in range(40)])
    clean(p, now=t0 + 59_999)
    assert (b"k1", None) in [(r.key, r.value) for r in read_all(p)]  # still within delete.retention.ms
    produce(p, [(b"k3", b"x%d" % i) for i in range(40)])
    clean(p, now=t0 + 60_000)
    assert b"k1" not in [r.key for r in read_all(p)]
    assert {r.key for r in read_all(p)} == {b"k0", b"k2", b"k3", b"k4"}


def test_records_without_a_key_are_removed_as_kafka_does(compacted):
    # A compacted topic refuses them; they are there if the topic was switched to compact afterwards.
    before = compacted(dataclasses.replace(COMPACT, cleanup_policy="delete"))
    produce(before, [(None, b"x")] * 30)
    before.close()
    p = compacted()
    produce(p, [(b"k", b"v%d" % i) for i in range(60)])
    clean(p)
    assert all(r.key is not None for r in read_all(p))


def test_an_idempotent_producers_last_batch_keeps_its_header_when_all_its_records_go(compacted):
    p = compacted()
    for seq in range(40):
        batch = rec.build_batch([(b"k", b"v%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq)
        p.append(batch)
    produce(p, [(b"k", b"final")] * 30)
    clean(p)
    empties = [b for b in stored_batches(p.directory) if b.header.producer_id == 7]
    assert empties and all(b.header.records_count == 0 for b in empties)
    assert empties[-1].header.base_sequence == 39  # the producer's last sequence survives
    assert [r.value for r in read_all(p) if r.key == b"k"] == [b"final"]


def transactional(pairs, pid: int = 9, seq: int = 0) -> bytearray:
    return rec.build_batch(pairs, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def test_a_committed_transactions_batch_and_its_marker_are_kept(compacted):
    p = compacted()
    p.append(transactional([(b"k", b"in-a-transaction")]))
    p.append_marker(9, 0, True, 0)
    produce(p, [(b"j", b"v%d" % i) for i in range(60)])
    clean(p)
    assert b"in-a-transaction" in [r.value for r in read_all(p)]
    assert any(b.header.is_control for b in stored_batches(p.directory))


def test_an_aborted_transaction_neither_removes_the_committed_value_nor_survives_cleaning(compacted):
    p = compacted()
    produce(p, [(b"k", b"committed")])
    p.append(transactional([(b"k", b"aborted"), (b"only-aborted", b"aborted")]))
    p.append_marker(9, 0, False, 0)
    produce(p, [(b"filler-%d" % i, b"v") for i in range(60)])
    clean(p)
    values = {r.key: r.value for r in read_all(p)}
    assert values[b"k"] == b"committed" and b"only-aborted" not in values
    assert any(b.header.is_control for b in stored_batches(p.directory))  # the marker stays


def test_an_open_transaction_holds_the_cleaner_below_the_last_stable_offset(compacted):
    p = compacted()
    produce(p, [(b"k", b"old-%d" % i) for i in range(100)])  # a few segments below the transaction
    opened = p.append(transactional([(b"t", b"undecided")])).base_offset
    produce(p, [(b"k", b"new-%d" % i) for i in range(100)])
    stats = clean(p)
    assert 0 < stats.end_offset <= opened  # cleaned, but nothing at or past the open transaction
    assert b"undecided" in [r.value for r in read_all(p)]


def test_a_small_offset_map_cleans_what_fits_and_the_next_cleaning_the_rest(compacted):
    p = compacted()
    pairs = [(b"key-%d" % i, b"v") for i in range(300)] + [(b"key-%d" % i, b"w") for i in range(300)]
    offsets = produce(p, pairs, per_batch=10)
    c = Cleaner(OffsetMap(24 * 200, load_factor=0.9), crash_at="")
    first = clean(p, c)
    assert first.end_offset < 600
    while c.clean(p, first_dirty_offset(p.directory)) is not None:
        pass
    got = {r.key: (r.value, r.offset) for r in read_all(p)}
    assert got == final_values(pairs, offsets)


def test_a_cleaned_partition_recovers_with_its_gaps_after_a_crash(compacted, tmp_path):
    p = compacted()
    produce(p, [(b"k%d" % (i % 9), b"v%d" % i) for i in range(300)])
    clean(p)
    want = {r.key: (r.value, r.offset) for r in read_all(p)}
    p.state.update(recovery_point=0)
    p.close(clean=False)
    again = compacted(dataclasses.replace(COMPACT, cleanup_policy="delete"))  # gaps known from the checkpoint
    assert {r.key: (r.value, r.offset) for r in read_all(again)} == want
    assert again.log_end_offset == 300
    assert cleaner_checkpoint.was_cleaned(tmp_path / "t-0")


# ---------------------------------------------------------------- crash points


def _clean_in_child(directory, point: str) -> int:
    """Fork a cleaner process that dies (os._exit) at `point`; its exit code."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            part = Partition(directory, COMPACT, recover=False)
            Cleaner(OffsetMap(1 << 20), crash_at=point).clean(part, first_dirty_offset(directory))
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_reader_that_listed_the_segments_before_a_swap_never_pairs_an_old_log_with_new_indexes(compacted,
                                                                                                   tmp_path):
    """Older segments are opened when read: one opened mid-swap (the cleaned indexes renamed in, the .log not
    yet) is put back and the read is done again once the swap is over. Paired, the cleaned index's position
    of an offset (smaller: records went) would land inside an old batch."""
    p = compacted()
    pairs = [(b"dup" if i % 2 else b"u%d" % i, b"v%d" % i + b"." * (i * 7 % 41)) for i in range(300)]
    offsets = produce(p, pairs)
    p.roll()
    old_end = p.segment_bases()[1]  # the first segment's end: the cleaned one starts at 0 too
    rehearsal = tmp_path / "rehearsal" / "t-0"  # the same swap cut short on a copy: where its index places offsets
    shutil.copytree(p.directory, rehearsal)
    assert _clean_in_child(rehearsal, "swap-indexes-renamed") == CRASH_EXIT
    target = max(o for o, _ in index_on_disk(Partition(rehearsal, COMPACT), 0) if 0 < o < old_end)
    reader = Partition(p.directory, COMPACT, recover=False)
    real, swapped = reader.snapshot, []

    def snapshot_then_half_a_swap():
        snap = real()  # the segments listed, none older opened
        if not swapped:
            swapped.append(_clean_in_child(p.directory, "swap-indexes-renamed"))
        return snap

    reader.snapshot = snapshot_then_half_a_swap
    data = reader.read(target, 1 << 20).slice.read()
    assert swapped == [CRASH_EXIT]
    got = [(r.offset, r.key, r.value) for pos, _ in rec.iter_batches(data) for r in rec.decode_records(data, pos)]
    produced = {(o, k, v) for o, (k, v) in zip(offsets, pairs)}
    assert got and set(got) <= produced and got[0][0] == target  # the batch asked for, whole
    assert {r.key: (r.value, r.offset) for r in read_all(reader)} == final_values(pairs, offsets)
    reader.close()


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.parametrize("who_repairs", ["a restart", "the next writer", "the next reader"])
def test_a_cleaner_killed_at_any_crash_point_is_finished_or_rolled_back_and_no_key_loses_its_last_value(
        compacted, point, who_repairs):
    p = compacted()
    pairs = [(b"k%d" % (i % 11), b"v%d" % i) for i in range(300)]
    offsets = produce(p, pairs, per_batch=3)
    p.roll()
    original = {(r.offset, r.key, r.value) for r in read_all(p)}
    assert _clean_in_child(p.directory, point) == CRASH_EXIT
    if who_repairs == "a restart":
        p.close(clean=False)
        p = compacted()
    elif who_repairs == "the next writer":
        offsets += produce(p, [(b"k0", b"after")])
        pairs = pairs + [(b"k0", b"after")]
    seen = read_all(p)  # the next reader waits out (or repairs) a swap left half done
    assert {r.key: (r.value, r.offset) for r in seen} == final_values(pairs, offsets)
    assert {(r.offset, r.key, r.value) for r in seen if r.value != b"after"} <= original
    assert [r.offset for r in seen] == sorted(r.offset for r in seen)
    assert p.snapshot().pending_op == 0
    if who_repairs == "a restart" or point != "cleaned-written":  # before the swap began, only a restart looks
        assert leftovers(p) == []
    # and the next cleaning goes on from there, leaving nothing behind
    Cleaner(OffsetMap(1 << 20), crash_at="").clean(p, first_dirty_offset(p.directory))
    assert {r.key: (r.value, r.offset) for r in read_all(p)} == final_values(pairs, offsets)
    assert leftovers(p) == []


def leftovers(p: Partition) -> list[str]:
    return [n for n in os.listdir(p.directory) if n.endswith((".cleaned", ".swap"))]


def test_a_reader_holding_old_segments_keeps_reading_them_across_a_swap(compacted, tmp_path):
    p = compacted()
    pairs = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(200)]
    produce(p, pairs)
    p.roll()
    reader = Partition(p.directory, COMPACT, recover=False)  # another process's view
    held = reader.read(0, 1 << 20)  # a fetch whose sendfile is still in flight
    before = held.slice.read()
    Cleaner(OffsetMap(1 << 20), crash_at="").clean(p, 0)
    assert held.slice.read() == before  # the old inode, still open
    assert {r.key for r in read_all(reader)} == {b"k0", b"k1", b"k2", b"k3"}
    assert read_all(reader) == read_all(p)
    reader.close(clean=False)


def test_a_follower_copies_a_compacted_leader_with_its_gaps_and_rebuilt_batches(tmp_path):
    leader = Partition(tmp_path / "broker-1" / "t-0", COMPACT, broker_id=1)
    follower = Partition(tmp_path / "broker-2" / "t-0", COMPACT, broker_id=2)
    try:
        leader.become_leader(0, (1, 2), (1,), 0)
        follower.become_follower(1, 0, (1, 2), (1,), 0)
        produce(leader, [(b"k%d" % (i % 6), b"v%d" % i) for i in range(200)], per_batch=4)
        clean(leader)
        produce(leader, [(b"k1", b"after")])
        offset, rounds = 0, 0
        while offset < leader.log_end_offset and rounds < 1000:  # the replica fetcher's loop
            got = leader.read(offset, 1 << 20, upto_log_end=True)
            data = bytearray(got.slice.read())
            if data:
                follower.append_replica(data, got.high_watermark, following=0)
            offset, rounds = follower.log_end_offset, rounds + 1
        assert follower.log_end_offset == leader.log_end_offset
        assert [(b.base_offset, b.last_offset, b.data[12:]) for b in stored_batches(follower.directory)] == \
            [(b.base_offset, b.last_offset, b.data[12:]) for b in stored_batches(leader.directory)]
    finally:
        leader.close()
        follower.close()


@pytest.mark.parametrize("seed", range(6))
def test_compaction_guarantees_hold_over_random_rounds_of_produce_and_clean(compacted, seed):
    """Kafka's guarantees, property-style: a consumer from the start sees the final value of every key
    (a delete as its tombstone, within delete.retention.ms); every record it sees is the one produced at
    that offset, in order; and nothing at or above the first uncleanable offset is ever removed."""
    rng = random.Random(seed)
    p = compacted()
    produced: dict[int, tuple] = {}
    pairs_all, offsets_all = [], []
    for _ in range(6):
        pairs = [(b"k%d" % rng.randrange(rng.choice([3, 30, 300])),
                  None if rng.random() < 0.1 else b"v%d" % rng.randrange(10**6)) for _ in range(rng.randrange(50, 300))]
        codec = rng.choice([0, 0, compression.GZIP, compression.LZ4, compression.SNAPPY])
        offsets = produce(p, pairs, codec, rng.choice([1, 3, 10]))
        produced.update({o: kv for o, kv in zip(offsets, pairs)})
        pairs_all += pairs
        offsets_all += offsets
        if rng.random() < 0.7:
            p.roll()
        uncleanable = p.snapshot().active_base
        tail = [r.offset for r in read_all(p) if r.offset >= uncleanable]
        memory = rng.choice([24 * 64, 1 << 20])
        Cleaner(OffsetMap(memory), crash_at="").clean(p, first_dirty_offset(p.directory))
        seen = read_all(p)
        assert [r.offset for r in seen if r.offset >= uncleanable] == tail
        assert all(produced[r.offset] == (r.key, r.value) for r in seen)
        assert [r.offset for r in seen] == sorted(r.offset for r in seen)
        last = {}
        for r in seen:
            last[r.key] = (r.value, r.offset)
        assert last == final_values(pairs_all, offsets_all)


def test_dump_log_reads_a_cleaned_partition_without_calling_its_gaps_corruption(compacted, capsys):
    from mmlog.cli.main import main

    p = compacted()
    produce(p, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(200)])
    clean(p)
    assert main(["dump-log", str(p.directory)]) == 0
    assert "bad offset" not in capsys.readouterr().out


def _log_files(directory) -> dict[str, bytes]:
    """Every segment file of a partition by name, and the cleaner's checkpoint (not the state page: its
    flush times are the clock's)."""
    files = {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.suffix in (".log", ".index",
                                                                                          ".timeindex", ".txnindex")}
    files["checkpoint"] = repr(cleaner_checkpoint.read(directory.parent)).encode()
    return files


@pytest.mark.parametrize("seed", range(3))
def test_cleaning_a_window_at_a_time_writes_the_bytes_one_pass_over_each_segment_writes(tmp_path, seed):
    """The cleaner holds a window of a segment at a time (module docstring, "Memory"). With windows of
    one batch, what crosses windows (transactions, producers' last batches, the map, delete horizons)
    must decide exactly as a pass over a whole segment does: the files are compared byte for byte
    after each of several rounds of random produces (codecs, tombstones, idempotent and transactional
    producers, commits and aborts) and cleanings."""
    rng = random.Random(seed)
    whole, windowed = tmp_path / "whole" / "t-0", tmp_path / "windowed" / "t-0"
    seq = {9: 0, 11: 0}
    now = 10**12
    for _ in range(5):
        p = Partition(windowed, COMPACT)
        for _ in range(rng.randrange(20, 60)):
            pairs = [(b"k%d" % rng.randrange(40), None if rng.random() < 0.15 else b"v%d" % rng.randrange(10**6))
                     for _ in range(rng.choice([1, 3, 8]))]
            codec = rng.choice([0, 0, compression.GZIP, compression.LZ4, compression.ZSTD])
            kind = rng.random()
            if kind < 0.15:  # a transaction of producer 9 or 11, then (maybe later) its marker
                pid = rng.choice([9, 11])
                p.append(rec.build_batch(pairs, compression=codec, producer_id=pid, producer_epoch=0,
                                         base_sequence=seq[pid], transactional=True))
                seq[pid] += len(pairs)
                if rng.random() < 0.7:
                    p.append_marker(pid, 0, rng.random() < 0.5, 0)
            elif kind < 0.25:  # an idempotent producer
                p.append(rec.build_batch(pairs, compression=codec, producer_id=7, producer_epoch=0,
                                         base_sequence=seq.setdefault(7, 0)))
                seq[7] += len(pairs)
            else:
                p.append(rec.build_batch(pairs, compression=codec))
        for pid in (9, 11):  # every transaction decided, so that the cleaner reaches the log end
            p.append_marker(pid, 0, True, 0)
        p.roll()
        p.close()
        shutil.rmtree(whole.parent, ignore_errors=True)
        shutil.copytree(windowed.parent, whole.parent)
        now += 10**8  # past the delete horizons stamped a round before (delete.retention.ms: one day)
        for directory, window in ((whole, (1 << 30, 1 << 30)), (windowed, (1, 1))):
            part = Partition(directory, COMPACT)
            Cleaner(OffsetMap(1 << 20), crash_at="", window=window).clean(
                part, first_dirty_offset(directory), now)
            part.close()
        assert _log_files(windowed) == _log_files(whole)
