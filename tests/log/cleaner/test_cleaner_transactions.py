"""The log cleaner over transactional logs: Kafka's rules for committed and aborted transactions,
their markers, the transaction index and the producers that go on writing after compaction."""

from __future__ import annotations

import dataclasses
import os

import pytest

from mmlog.errors import InvalidProducerEpoch
from mmlog.log import producer_state
from mmlog.log.cleaner import kernels as ck
from mmlog.log.cleaner.cleaner import CRASH_EXIT, CRASH_POINTS, Cleaner
from mmlog.log.cleaner.partition_files import first_dirty_offset
from mmlog.log.cleaner.offset_map import OffsetMap
from mmlog.log.partition import Partition
from mmlog.protocol import records as rec
from tests.log.logtools import stored_batches
from tests.log.cleaner.test_cleaner import COMPACT, compacted, leftovers, produce, read_all, warm  # noqa: F401 (fixtures)

RETENTION = 60_000
TXN = dataclasses.replace(COMPACT, delete_retention_ms=RETENTION)
T0 = 1_800_000_000_000  # "now" of the first cleaning; later ones add to it


class Txn:
    """A transactional producer writing to one partition as a client and its coordinator would."""

    def __init__(self, p: Partition, pid: int, epoch: int = 0) -> None:
        self.p, self.pid, self.epoch, self.seq = p, pid, epoch, 0

    def send(self, pairs) -> list[int]:
        batch = rec.build_batch(pairs, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                                transactional=True)
        info = self.p.append(batch)
        self.seq += len(pairs)
        return list(range(info.base_offset, info.last_offset + 1))

    def end(self, commit: bool) -> int:
        return self.p.append_marker(self.pid, self.epoch, commit, 0).base_offset


def clean(p: Partition, now: int):
    p.roll()
    return Cleaner(OffsetMap(1 << 20), crash_at="").clean(p, first_dirty_offset(p.directory), now)


def markers(p: Partition) -> list:
    return [b for b in stored_batches(p.directory) if b.header.is_control]


def committed_view(p: Partition) -> dict:
    """What a read_committed consumer from the start ends with: key -> (value, offset), aborted
    transactions' records skipped by the transaction index (Kafka's consumer rule)."""
    aborted = p.aborted_transactions(p.log_start_offset, p.high_watermark)
    control = {r.offset for b in markers(p) for r in rec.decode_records(b.data)}
    out = {}
    for r in read_all(p):
        if r.offset in control:
            continue
        if not any(t.first_offset <= r.offset < t.last_offset for t in aborted):
            out[r.key] = (r.value, r.offset)
    return out


def test_committed_transactional_records_are_compacted_like_any_and_keep_their_offsets(compacted):
    p = compacted(TXN)
    t = Txn(p, 9)
    old = t.send([(b"k", b"old"), (b"j", b"j1")])
    t.end(True)
    new = t.send([(b"k", b"new")])
    t.end(True)
    produce(p, [(b"filler", b"x%d" % i) for i in range(40)])
    clean(p, T0)
    got = committed_view(p)
    assert got[b"k"] == (b"new", new[0]) and got[b"j"] == (b"j1", old[1])
    assert b"old" not in [r.value for r in read_all(p)]  # the older value of a committed key went


def test_a_marker_stays_while_its_transaction_has_data_then_is_stamped_and_removed_after_delete_retention(
        compacted):
    """Kafka's two passes: the first cleaning that finds a marker with no data left stamps its batch
    with a delete horizon (now + delete.retention.ms); the first cleaning past it removes it."""
    p = compacted(TXN)
    t = Txn(p, 9)
    t.send([(b"k", b"first")])
    first_marker = t.end(True)
    t.send([(b"k", b"second")])  # shadows the first transaction's only record
    t.end(True)
    produce(p, [(b"filler", b"x%d" % i) for i in range(40)])
    clean(p, T0)  # the first transaction's batch is seen (its marker stays), then removed
    assert first_marker in [b.base_offset for b in markers(p)]
    produce(p, [(b"filler", b"y%d" % i) for i in range(40)])
    clean(p, T0 + 1)  # no data left: stamped
    [stamped] = [b for b in markers(p) if b.base_offset == first_marker]
    assert stamped.header.attributes & ck.DELETE_HORIZON_BIT
    assert stamped.header.base_timestamp == T0 + 1 + RETENTION
    assert stamped.header.records_count == 1
    produce(p, [(b"filler", b"z%d" % i) for i in range(40)])
    clean(p, T0 + RETENTION)  # before the horizon: kept as it is
    assert first_marker in [b.base_offset for b in markers(p)]
    produce(p, [(b"filler", b"w%d" % i) for i in range(40)])
    clean(p, T0 + 1 + RETENTION)
    assert first_marker not in [b.base_offset for b in markers(p)]
    assert committed_view(p)[b"k"][0] == b"second"
    # the second transaction's marker stays: its batch holds the producer's last sequence (kept)
    assert len(markers(p)) == 1


def test_a_marker_in_a_later_segment_than_its_transactions_data_stays_while_the_data_does(compacted):
    p = compacted(TXN)
    t = Txn(p, 9)
    t.send([(b"k", b"committed")])
    p.roll()  # the marker lands in the next segment: the cleaner carries what it saw across
    marker = t.end(True)
    produce(p, [(b"filler", b"x%d" % i) for i in range(40)])
    for now in (T0, T0 + 2 * RETENTION):
        produce(p, [(b"filler", b"y")])
        clean(p, now)
        [kept] = [b for b in markers(p) if b.base_offset == marker]
        assert not kept.header.attributes & ck.DELETE_HORIZON_BIT and kept.header.records_count == 1
    assert committed_view(p)[b"k"][0] == b"committed"


def test_an_aborted_transactions_records_go_and_its_index_entry_goes_with_its_data(compacted):
    p = compacted(TXN)
    produce(p, [(b"k", b"committed")])
    t = Txn(p, 9)
    t.send([(b"k", b"aborted"), (b"only-aborted", b"aborted")])
    abort = t.end(False)
    t.send([(b"later", b"committed-later")])  # the producer goes on: its last sequence is here
    t.end(True)
    produce(p, [(b"filler-%d" % i, b"v") for i in range(60)])
    assert [a.last_offset for a in p.aborted_transactions(0, p.high_watermark)] == [abort]
    clean(p, T0)
    values = {r.key: r.value for r in read_all(p)}  # read_uncommitted too: the aborted records are gone
    assert values[b"k"] == b"committed" and b"only-aborted" not in values
    assert values[b"later"] == b"committed-later"
    assert [a.last_offset for a in p.aborted_transactions(0, p.high_watermark)] == [abort]  # data seen this pass
    produce(p, [(b"filler-%d" % i, b"w") for i in range(60)])
    clean(p, T0 + 1)
    assert p.aborted_transactions(0, p.high_watermark) == []  # no data left: the entry goes, the marker is stamped
    assert abort in [b.base_offset for b in markers(p)]
    produce(p, [(b"filler-%d" % i, b"z") for i in range(60)])
    clean(p, T0 + 1 + RETENTION)
    assert abort not in [b.base_offset for b in markers(p)]
    assert committed_view(p)[b"k"] == (b"committed", 0)


def test_an_open_transaction_is_never_cleaned_and_a_read_committed_view_is_unchanged_by_cleaning(compacted):
    p = compacted(TXN)
    produce(p, [(b"a", b"a0-%d" % i) for i in range(60)])  # whole segments below the transactions
    committed, aborted = Txn(p, 1), Txn(p, 2)
    committed.send([(b"a", b"a1"), (b"b", b"b1")])
    aborted.send([(b"a", b"never")])
    committed.end(True)
    aborted.end(False)
    produce(p, [(b"a", b"a2")])
    opened = Txn(p, 3)
    open_at = opened.send([(b"b", b"undecided")])[0]
    produce(p, [(b"c", b"c%d" % i) for i in range(60)])
    before = committed_view(p)
    stats = clean(p, T0)
    assert stats.end_offset <= open_at
    after = committed_view(p)
    assert {k: v for k, v in after.items() if v[1] < open_at} == \
        {k: v for k, v in before.items() if v[1] < open_at}
    assert b"undecided" in [r.value for r in read_all(p)]


# ---------------------------------------------------------------- producers after compaction


def reopen_without_snapshots(p: Partition, config=TXN) -> Partition:
    """A restart whose producer state comes from the cleaned log alone (Kafka's rebuild after the
    snapshots are gone): what an idempotent producer is checked against next."""
    directory = p.directory
    p.close()
    for offset in producer_state.snapshot_offsets(directory):
        os.unlink(producer_state.snapshot_path(directory, offset))
    return Partition(directory, config)


def test_an_idempotent_producer_goes_on_after_compaction_removed_all_its_records(compacted):
    p = compacted(TXN)
    for seq in range(20):
        p.append(rec.build_batch([(b"k", b"v%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq))
    produce(p, [(b"k", b"someone-else")] * 30)
    clean(p, T0)
    mine = [b for b in stored_batches(p.directory) if b.header.producer_id == 7]
    assert [(b.header.records_count, b.header.base_sequence) for b in mine] == [(0, 19)]  # only its last, empty
    p = reopen_without_snapshots(p)
    info = p.append(rec.build_batch([(b"k", b"next")], producer_id=7, producer_epoch=0, base_sequence=20))
    assert info.base_offset == p.log_end_offset - 1  # in sequence: no OUT_OF_ORDER_SEQUENCE_NUMBER
    again = p.append(rec.build_batch([(b"k", b"next")], producer_id=7, producer_epoch=0, base_sequence=20))
    assert again.base_offset == info.base_offset  # and a retry is still known as a duplicate


def test_a_transactional_producer_goes_on_after_compaction_and_its_last_marker_keeps_its_epoch(compacted):
    p = compacted(TXN)
    t = Txn(p, 5)
    for i in range(5):
        t.send([(b"k", b"t%d" % i)])
        t.end(True)
    t.send([(b"k", b"doomed")])
    p.append_marker(5, 1, False, 0)  # the coordinator fences epoch 0: an abort at epoch 1, no data in epoch 1
    produce(p, [(b"k", b"overwritten")] * 20)
    for i in range(4):  # cleanings until every marker's horizon passed
        produce(p, [(b"f", b"%d" % i)])
        clean(p, T0 + i * (RETENTION + 1))
    left = [b for b in stored_batches(p.directory) if b.header.producer_id == 5]
    assert [(b.header.is_control, b.header.producer_epoch, b.header.records_count) for b in left] == \
        [(True, 1, 0)]  # the epoch-1 marker, emptied: it alone holds the producer's epoch
    p = reopen_without_snapshots(p)
    with pytest.raises(InvalidProducerEpoch):  # the fenced epoch stays fenced
        p.append(rec.build_batch([(b"k", b"zombie")], producer_id=5, producer_epoch=0, base_sequence=6,
                                 transactional=True))
    t = Txn(p, 5, epoch=1)
    t.send([(b"k", b"epoch-1")])
    t.end(True)
    assert committed_view(p)[b"k"][0] == b"epoch-1"


# ---------------------------------------------------------------- crash points


def _clean_in_child(directory, point: str, now: int) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            part = Partition(directory, TXN, recover=False)
            Cleaner(OffsetMap(1 << 20), crash_at=point).clean(part, first_dirty_offset(directory), now)
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_cleaner_killed_at_any_crash_point_of_a_transactional_log_loses_no_committed_value(compacted, point):
    p = compacted(TXN)
    expected = {}
    for i in range(12):  # committed and aborted transactions of two producers, interleaved
        t = Txn(p, 1 + i % 2)
        t.seq = i // 2
        offsets = t.send([(b"k%d" % (i % 4), b"t%d" % i)])
        commit = i % 3 != 0
        t.end(commit)
        if commit:
            expected[b"k%d" % (i % 4)] = (b"t%d" % i, offsets[0])
        produce(p, [(b"x%d" % (i % 3), b"n%d" % i)])
        expected[b"x%d" % (i % 3)] = (b"n%d" % i, p.log_end_offset - 1)
    clean(p, T0)  # a first pass, then one killed at `point` (markers being stamped or removed)
    produce(p, [(b"x0", b"last")])
    expected[b"x0"] = (b"last", p.log_end_offset - 1)
    p.roll()
    assert _clean_in_child(p.directory, point, T0 + 2 * RETENTION) == CRASH_EXIT
    p.close(clean=False)
    p = compacted(TXN)  # a restart repairs it
    assert committed_view(p) == expected
    assert p.snapshot().pending_op == 0 and leftovers(p) == []
    clean(p, T0 + 3 * RETENTION)  # and the cleaning finishes from there
    assert committed_view(p) == expected
    assert all(not b.header.is_transactional or b.header.is_control or b.header.records_count == 0
               or any(r.offset == v[1] for r in rec.decode_records(b.data) for v in expected.values())
               for b in stored_batches(p.directory))
