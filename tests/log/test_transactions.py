"""Transactions in a partition log: open transactions hold the last stable offset back, markers end them,
aborted ones go to the transaction index, and all of it survives rolls, restarts, crashes and truncation."""

from __future__ import annotations


import pytest

from mmlog.errors import InvalidProducerEpoch, InvalidRecord, InvalidTxnState, TransactionCoordinatorFenced
from mmlog.log import txn_index
from mmlog.log.partition import Partition
from mmlog.log.producer_state import snapshot_offsets, snapshot_path
from mmlog.protocol import records as rec

A, B = 7000, 7001


class Producer:
    """A transactional producer writing raw batches (sequences counted here)."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int = 2, tag: str = "t", transactional: bool = True) -> bytearray:
        b = rec.build_batch([(None, f"{tag}-{self.seq + i}".encode()) for i in range(n)], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=self.seq, transactional=transactional)
        self.seq += n
        return b


def plain(n: int = 1) -> bytearray:
    return rec.build_batch([(None, b"plain")] * n)


def committed_offsets(p: Partition, start: int = 0) -> list[int]:
    """What a read_committed reader keeps, by Kafka's consumer algorithm (offsets of data records)."""
    out, offset = [], start
    data = b""
    while True:
        r = p.read(offset, 1 << 20, committed=True)
        if not r.slice.size:
            break
        data = r.slice.read()
        aborted = sorted((t.first_offset, t.producer_id) for t in p.aborted_transactions(offset, r.upper_bound))
        live: set[int] = set()
        last = offset
        for _, h in rec.iter_batches(data):
            while aborted and aborted[0][0] <= h.base_offset:
                live.add(aborted.pop(0)[1])
            if h.is_control:
                live.discard(h.producer_id)
            elif not (h.is_transactional and h.producer_id in live):
                out += [o for o in range(h.base_offset, h.next_offset) if o >= offset]
            last = h.next_offset
        offset = last
    return out


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_offset(open_partition):
    p = open_partition()
    p.append(plain(3))
    a = Producer(A)
    p.append(a.batch())
    p.append(plain())
    assert (p.high_watermark, p.last_stable_offset) == (6, 3)
    assert p.read(0, 1 << 20, committed=True).slice.size == len(plain(3))  # stops at the open transaction
    assert p.read(3, 1 << 20, committed=True).slice.size == 0
    assert p.read(3, 1 << 20).slice.size > 0  # read_uncommitted reads past it
    p.append_marker(A, 0, commit=True, coordinator_epoch=0)
    assert p.last_stable_offset == p.high_watermark == 7
    assert committed_offsets(p) == [0, 1, 2, 3, 4, 5]


def test_an_aborted_transaction_is_indexed_and_dropped_by_read_committed(open_partition, partition_dir):
    p = open_partition()
    a, b = Producer(A), Producer(B)
    p.append(a.batch())          # 0-1 A
    p.append(b.batch())          # 2-3 B
    p.append(a.batch())          # 4-5 A
    assert p.last_stable_offset == 0
    p.append_marker(A, 0, commit=False, coordinator_epoch=3)  # 6: A aborts
    assert p.last_stable_offset == 2  # B is still open
    entries = txn_index.read(partition_dir, 0)
    assert entries == [txn_index.AbortedTxn(A, 0, 6, 2)]  # LSO at abort: B's first offset
    p.append_marker(B, 0, commit=True, coordinator_epoch=3)  # 7
    assert p.last_stable_offset == 8
    assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions(0, 8)] == [(A, 0)]
    assert p.aborted_transactions(7, 8) == []  # nothing aborted overlaps
    assert committed_offsets(p) == [2, 3]


def test_transaction_rules_follow_kafkas_producer_append_info(open_partition):
    p = open_partition()
    a = Producer(A)
    p.append(a.batch())
    with pytest.raises(InvalidTxnState):
        p.append(a.batch(transactional=False))  # non-transactional while its transaction is open
    a.seq -= 2
    p.append_marker(A, 0, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFenced):
        p.append_marker(A, 0, commit=True, coordinator_epoch=4)
    p.append(a.batch())  # after a marker, a transactional batch starts a new transaction
    assert p.last_stable_offset == 3
    a.epoch = 1
    a.seq = 0
    p.append_marker(A, 1, commit=False, coordinator_epoch=5)  # the coordinator's abort bumps the epoch
    with pytest.raises(InvalidProducerEpoch):
        p.append_marker(A, 0, commit=False, coordinator_epoch=5)
    with pytest.raises(InvalidProducerEpoch):
        p.append(Producer(A, epoch=0).batch())
    assert p.last_stable_offset == p.log_end_offset


def test_clients_may_not_write_control_batches_nor_transactional_ones_without_a_producer(open_partition):
    p = open_partition()
    with pytest.raises(InvalidRecord):
        p.append(rec.build_end_txn_marker(A, 0, True, 0))
    with pytest.raises(InvalidRecord):
        p.append(rec.build_batch([(None, b"x")], transactional=True))
    assert p.log_end_offset == 0


def test_a_marker_for_a_producer_without_an_open_transaction_ends_nothing(open_partition, partition_dir):
    p = open_partition()
    info = p.append_marker(A, 0, commit=False, coordinator_epoch=0)
    assert info.base_offset == 0 and p.last_stable_offset == 1
    assert txn_index.read(partition_dir, 0) == []


def test_open_transactions_survive_a_roll_and_a_clean_restart(open_partition, partition_dir, config):
    p = open_partition()
    a, b = Producer(A), Producer(B)
    p.append(a.batch())
    for _ in range(40):
        p.append(b.batch(4, transactional=False))
    assert len(p.segment_bases()) > 1
    assert p.last_stable_offset == 0
    p.close()
    q = open_partition()
    assert not q.recovered and q.last_stable_offset == 0
    assert snapshot_offsets(partition_dir)
    q.append_marker(A, 0, commit=False, coordinator_epoch=0)
    assert q.last_stable_offset == q.log_end_offset
    marker_segment = q.segment_bases()[-1]
    assert txn_index.read(partition_dir, marker_segment) == [txn_index.AbortedTxn(A, 0, q.log_end_offset - 1,
                                                                                  q.log_end_offset)]
    # the index entry lives in the marker's segment, the transaction began in the first one
    assert [t.first_offset for t in q.aborted_transactions(0, q.log_end_offset)] == [0]


def test_a_crash_rebuilds_open_transactions_and_the_index_from_the_log(open_partition, partition_dir):
    p = open_partition()
    a, b = Producer(A), Producer(B)
    p.append(a.batch())
    p.append(b.batch())
    p.append_marker(A, 0, commit=False, coordinator_epoch=0)
    before = txn_index.read(partition_dir, 0)
    # a crash: no clean close, the snapshots and the index are lost too
    p.close(clean=False)
    for o in snapshot_offsets(partition_dir):
        snapshot_path(partition_dir, o).unlink()
    txn_index.reset(partition_dir, 0)
    q = open_partition()
    assert q.recovered
    assert q.last_stable_offset == 2  # B is open
    assert txn_index.read(partition_dir, 0) == before
    q.append_marker(B, 0, commit=True, coordinator_epoch=0)
    assert committed_offsets(q) == [2, 3]


def test_a_torn_index_tail_is_cut_and_the_entry_rebuilt(open_partition, partition_dir):
    p = open_partition()
    a = Producer(A)
    p.append(a.batch())
    p.append_marker(A, 0, commit=False, coordinator_epoch=0)
    p.flush()
    p.close(clean=False)
    path = txn_index.path(partition_dir, 0)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:20])  # half an entry of garbage at the tail
    assert txn_index.read(partition_dir, 0) == [txn_index.AbortedTxn(A, 0, 2, 3)]  # readers skip it
    q = open_partition()
    assert path.read_bytes() == whole
    assert [t.producer_id for t in q.aborted_transactions(0, 3)] == [A]


def test_an_index_entry_past_the_log_end_goes_with_a_truncation(open_partition, partition_dir):
    p = open_partition()
    a, b = Producer(A), Producer(B)
    p.append(a.batch())       # 0-1
    p.append_marker(A, 0, commit=False, coordinator_epoch=0)  # 2
    p.append(b.batch())       # 3-4
    p.append_marker(B, 0, commit=False, coordinator_epoch=0)  # 5
    assert len(txn_index.read(partition_dir, 0)) == 2
    p.truncate_to(5)
    assert txn_index.read(partition_dir, 0) == [txn_index.AbortedTxn(A, 0, 2, 3)]
    assert p.last_stable_offset == 3  # B open again: its marker is gone
    p.truncate_to(2)
    assert txn_index.read(partition_dir, 0) == []
    assert p.last_stable_offset == 0


def test_retention_deletes_the_index_with_its_segment(open_partition, partition_dir, config):
    p = open_partition()
    a = Producer(A)
    p.append(a.batch())
    p.append_marker(A, 0, commit=False, coordinator_epoch=0)
    p.roll()
    p.append(plain())
    assert txn_index.path(partition_dir, 0).exists()
    p.delete_records_before(3)
    p.apply_retention(now=1 << 60)
    assert not txn_index.path(partition_dir, 0).exists()


def test_a_marker_is_held_back_from_the_lso_until_the_hw_passes_it(open_partition):
    """Kafka's unreplicated transactions: decided, but not yet durable on the ISR."""
    p = open_partition()
    p.become_leader(1, [0, 1], [0, 1], 0)
    a = Producer(A)
    p.append(a.batch())   # 0-1
    p.record_follower_fetch(1, 2)
    p.maybe_advance_high_watermark()
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    p.append_marker(A, 0, commit=True, coordinator_epoch=0)   # 2
    p.append(plain())     # 3
    p.record_follower_fetch(1, 2)  # the follower has the data, not the marker
    p.maybe_advance_high_watermark()
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    p.record_follower_fetch(1, 3)  # now the marker too
    p.maybe_advance_high_watermark()
    assert (p.high_watermark, p.last_stable_offset) == (3, 3)
    p.record_follower_fetch(1, 4)
    p.maybe_advance_high_watermark()
    assert (p.high_watermark, p.last_stable_offset) == (4, 4)


def test_a_follower_copy_keeps_the_same_transactions_and_index(open_partition, tmp_path, config):
    leader = open_partition(tmp_path / "leader" / "t-0")
    follower = open_partition(tmp_path / "follower" / "t-0")
    follower.become_follower(0, 0, [0, 1], [0, 1], 0)
    a, b = Producer(A), Producer(B)
    leader.append(a.batch())
    leader.append(b.batch())
    leader.append_marker(A, 0, commit=False, coordinator_epoch=0)
    for _ in range(30):
        leader.append(plain(3))
    leader.append_marker(B, 0, commit=True, coordinator_epoch=0)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 1000, upto_log_end=True).slice.read()
        whole = max(pos + h.size for pos, h in rec.iter_batches(data))  # a fetch may end mid-batch
        follower.append_replica(bytearray(data[:whole]), leader.high_watermark)
        offset = follower.log_end_offset
    for base in leader.segment_bases():
        assert txn_index.read(tmp_path / "follower" / "t-0", base) == txn_index.read(tmp_path / "leader" / "t-0", base)
    assert follower.last_stable_offset == leader.last_stable_offset == leader.log_end_offset
    assert committed_offsets(follower) == committed_offsets(leader)


def test_a_version_one_snapshot_still_loads(tmp_path):
    from mmlog.log.producer_state import ProducerState, _decode
    import struct
    import numpy as np
    row = np.full(24, -1, dtype="<i8")
    row[:4] = (A, 2, 1000, 1)
    row[4:8] = (0, 4, 10, 14)
    data = b"MMLOGPS1" + struct.pack("<q", 1) + row.tobytes()
    entry = _decode(data)[A]
    assert (entry.epoch, entry.txn_first, entry.coordinator_epoch, list(entry.batches)) == (2, -1, -1, [(0, 4, 10, 14)])
    state = ProducerState(tmp_path)
    (tmp_path / f"{20:020d}.snapshot").write_bytes(data)
    assert state.load(20, 0, 1000, 10**9) == 20 and state.first_undecided() == -1


def test_snapshots_carry_open_transactions(tmp_path):
    from mmlog.log.producer_state import ProducerState
    state = ProducerState(tmp_path)
    h = rec.read_header(Producer(A).batch())
    state.upto = 0
    state.append(h, 10)
    assert state.first_undecided() == 10
    state.write_snapshot(12, 0, 10**9)
    again = ProducerState(tmp_path)
    again.load(12, 0, 10**12, 1)  # long expired, but an open transaction never expires
    assert again.first_undecided() == 10 and again.producers[A].txn_first == 10
