"""Idempotent producers in a partition log: duplicates answered with their first offsets, sequences checked,
state shared by every process through the log and kept across rolls, restarts and truncation."""

from __future__ import annotations

import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import InvalidProducerEpoch, InvalidRecord, OutOfOrderSequenceNumber, UnknownProducerId
from mmlog.log.producer_state import REPLAY_LIMIT, snapshot_offsets
from mmlog.protocol import records as rec

PID = 4000


def batch(seq: int, n: int = 2, pid: int = PID, epoch: int = 0, tag: str = "v") -> bytearray:
    return rec.build_batch([(None, f"{tag}-{seq + i}".encode()) for i in range(n)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq)


def test_a_retried_batch_is_answered_with_its_first_offsets_and_not_appended(open_partition):
    p = open_partition()
    first = p.append(batch(0))
    p.append(batch(2))
    again = p.append(batch(0))
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset) == (0, 1)
    assert p.log_end_offset == 4


def test_only_the_last_five_batches_are_recognised(open_partition):
    p = open_partition()
    for i in range(7):
        p.append(batch(2 * i))
    assert p.append(batch(4)).base_offset == 4  # the third of seven: within the last five
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(batch(0))  # too old to know: out of order, as Kafka answers
    assert p.log_end_offset == 14


def test_gaps_old_epochs_and_unknown_producers_are_refused(open_partition):
    p = open_partition()
    p.append(batch(0))
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(batch(5))
    with pytest.raises(UnknownProducerId):
        p.append(batch(3, pid=PID + 1))
    p.append(batch(0, epoch=1))  # a new epoch starts again at 0
    with pytest.raises(InvalidProducerEpoch):
        p.append(batch(2, epoch=0))
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(batch(7, epoch=2))  # a new epoch must start at 0
    assert p.log_end_offset == 4


def test_sequences_wrap_at_two_to_the_31(open_partition):
    p = open_partition()
    top = (1 << 31) - 2
    p.append(batch(0))
    # Jump to the top of the range the way a long-lived producer gets there: a new epoch, then in order.
    p.append(batch(0, epoch=1))
    p.producers.producers[PID].batches[-1] = (top - 2, top - 1, 2, 3)
    p.append(batch(top, epoch=1))  # top, top + 1 = 2^31 - 1
    p.append(batch(0, epoch=1, tag="wrapped"))  # then 0: in order after the wrap


def test_an_idempotent_request_holds_one_batch_per_partition(open_partition):
    p = open_partition()
    with pytest.raises(InvalidRecord, match="one batch"):
        p.append(batch(0) + batch(2))


def test_another_process_sees_the_state_through_the_log(open_partition, partition_dir):
    a = open_partition()
    b = open_partition(partition_dir, recover=False)  # a second processor on the same partition
    a.append(batch(0))
    b.append(batch(2))
    assert a.append(batch(2)).base_offset == 2  # a's duplicate, though b appended it
    assert b.append(batch(0)).base_offset == 0
    a.append(batch(4))
    with pytest.raises(OutOfOrderSequenceNumber):
        b.append(batch(8))


def test_state_survives_rolls_restarts_and_retention_through_snapshots(open_partition, partition_dir):
    cfg = LogConfig(segment_bytes=300, segment_index_bytes=1024)
    p = open_partition(cfg=cfg)
    for i in range(12):
        p.append(batch(2 * i))
    assert len(p.segment_bases()) > 3
    assert snapshot_offsets(partition_dir) == p.segment_bases()[1:]
    p.close(clean=False)
    again = open_partition(cfg=cfg)
    assert again.append(batch(20)).base_offset == 20
    with pytest.raises(OutOfOrderSequenceNumber):
        again.append(batch(30))
    again.delete_records_before(again.segment_bases()[-1])
    assert again.append(batch(24)).base_offset == 24  # the state outlives the deleted segments


def test_truncation_forgets_the_batches_it_removed(open_partition):
    p = open_partition(cfg=LogConfig(segment_bytes=300, segment_index_bytes=1024))
    for i in range(8):
        p.append(batch(2 * i))
    p.truncate_to(6)
    assert p.log_end_offset == 6 and max(snapshot_offsets(p.directory), default=0) <= 6
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(batch(8))  # sequences 6.. are gone with their records
    assert p.append(batch(6)).base_offset == 6


def test_plain_producers_pay_nothing_and_mix_with_idempotent_ones(open_partition):
    p = open_partition()
    p.append(rec.build_batch([(None, b"plain")]))
    p.append(batch(0))
    p.append(rec.build_batch([(None, b"plain")]))
    assert p.append(batch(0)).base_offset == 1


def test_a_clean_close_keeps_the_state_at_the_log_end(open_partition, partition_dir):
    p = open_partition()
    p.append(batch(0))
    p.append(batch(2))
    p.close(clean=True)
    assert snapshot_offsets(partition_dir) == [4]
    again = open_partition()
    assert again.append(batch(2)).base_offset == 2  # known from the snapshot alone


def test_a_clean_close_of_a_short_log_without_producers_writes_no_snapshot(open_partition, partition_dir):
    """An empty state over a few batches is what a reload from the log start rebuilds anyway: a stop of
    many partitions does not make a file for each."""
    p = open_partition()
    for _ in range(3):
        p.append(rec.build_batch([(None, b"plain")]))
    p.close(clean=True)
    assert snapshot_offsets(partition_dir) == []
    again = open_partition()
    with pytest.raises(UnknownProducerId):  # no producer known, as before the stop
        again.append(batch(5))
    assert again.append(batch(0)).base_offset == 3


def test_a_clean_close_after_a_long_stretch_of_plain_batches_keeps_a_snapshot(open_partition, partition_dir):
    """Past REPLAY_LIMIT offsets since the last snapshot, a restart would read that many headers: kept."""
    p = open_partition(cfg=LogConfig(segment_bytes=1 << 20))  # one segment: no roll's snapshot between
    records = [(None, b"plain")] * 100
    for _ in range(REPLAY_LIMIT // 100 + 1):
        p.append(rec.build_batch(records))
    p.close(clean=True)
    assert snapshot_offsets(partition_dir) == [(REPLAY_LIMIT // 100 + 1) * 100]
