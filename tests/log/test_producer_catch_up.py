"""A process brings its producer state to the log end by reading only the batch headers that may hold a
producer's batch: the state page bounds where such batches lie (state.py, PRODUCERS_END), every appender
keeps that bound, and a page from before it is bounded by its log end."""

from __future__ import annotations

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import OutOfOrderSequenceNumber
from mmlog.log.state import PRODUCERS_END, PRODUCERS_LAYOUT, STATE_FILE
from tests.log.test_transactions import Producer, plain

CONFIG = LogConfig(segment_bytes=4000)  # a roll every few dozen small batches


@pytest.fixture
def walks(monkeypatch):
    """How many times each partition read stored batch headers to catch its producers up (a spy on the
    real method: it still reads)."""
    from mmlog.log.segment_view import SegmentView

    counts: dict[int, int] = {}
    real = SegmentView._stored_batches

    def counted(self, s, start, producers_only=False):
        if producers_only:
            counts[id(self)] = counts.get(id(self), 0) + 1
        return real(self, s, start, producers_only=producers_only)

    monkeypatch.setattr(SegmentView, "_stored_batches", counted)
    return counts


def idempotent(producer: Producer, n: int = 2):
    return producer.batch(n, transactional=False)


def test_rolls_under_plain_appends_read_no_header_and_keep_the_producers_known(open_partition, walks):
    p = open_partition(cfg=CONFIG)
    other = open_partition(cfg=CONFIG, recover=False)  # another process's writer of the same partition
    known = Producer(7)
    first = p.append(idempotent(known))
    for writer in (other, p):  # plain batches from elsewhere, then ours: each writer rolls, catching up first
        rolled = len(writer._bases)
        for _ in range(100):
            writer.append(plain(3))
        assert len(writer._bases) > rolled + 1  # this writer rolled
    again = p.append(_retry(known, 2))  # the same batch again: answered from the state, not appended
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert walks.get(id(p), 0) == 0


def test_a_writer_that_rolls_keeps_its_producer_state_without_reading_a_snapshot(open_partition, monkeypatch):
    """The state a roll caught up and wrote down stays this process's in the new segment set: the rolls after
    it reload nothing (a reload lists the directory and reads a file while every connection waits)."""
    from mmlog.log.producer_state import ProducerState

    loads = []
    real = ProducerState.load
    monkeypatch.setattr(ProducerState, "load", lambda self, *a: loads.append(a) or real(self, *a))
    p = open_partition(cfg=CONFIG)
    known = Producer(7)
    first = p.append(idempotent(known))
    loads.clear()
    rolled = len(p._bases)
    for _ in range(300):
        p.append(plain(3))
    assert len(p._bases) > rolled + 3
    assert loads == []
    again = p.append(_retry(known, 2))  # still known after the rolls
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(_skip(known))


def _retry(producer: Producer, n: int) -> bytearray:
    """The producer's last batch of n records, sent again (a retry: its sequence numbers once more)."""
    producer.seq -= n
    return idempotent(producer, n)


def test_another_processs_producer_is_read_when_the_state_catches_up(open_partition, walks):
    """No roll in between (a roll's snapshot would hand the producer over): p reads the headers past what it
    knew, and finds the other writer's producer among them."""
    p = open_partition(cfg=LogConfig())
    other = open_partition(cfg=LogConfig(), recover=False)
    p.append(plain(1))
    stranger = Producer(11)
    for _ in range(30):
        other.append(plain(3))
    first = other.append(idempotent(stranger))
    for _ in range(30):
        other.append(plain(3))
    again = p.append(_retry(stranger, 2))  # p never saw this producer: its catch-up must read that batch
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert walks[id(p)] >= 1
    with pytest.raises(OutOfOrderSequenceNumber):
        p.append(_skip(stranger))


def _skip(producer: Producer) -> bytearray:
    """A batch that leaves a gap in the producer's sequence numbers."""
    producer.seq += 5
    return idempotent(producer)


def test_every_append_of_a_producers_batch_raises_the_bound_and_plain_ones_leave_it(open_partition):
    p = open_partition(cfg=CONFIG)
    p.append(plain(2))
    assert p.state.producers_end() == 0
    p.append(idempotent(Producer(3)))
    end = p.snapshot().log_end
    assert p.state.producers_end() == end
    p.append(plain(2))
    assert p.state.producers_end() == end
    p.append_marker(*_open_transaction(p), commit=True, coordinator_epoch=0)  # a marker is a producer's batch too
    assert p.state.producers_end() == p.snapshot().log_end


def _open_transaction(p) -> tuple[int, int]:
    txn = Producer(21)
    p.append(txn.batch(2))
    return txn.pid, txn.epoch


def test_a_page_that_did_not_keep_the_bound_is_bounded_by_its_log_end(open_partition, partition_dir):
    p = open_partition(cfg=CONFIG)
    producer = Producer(5)
    first = p.append(idempotent(producer))
    p.append(plain(2))
    p.close()
    slots = np.memmap(partition_dir / STATE_FILE, np.int64, mode="r+")
    slots[PRODUCERS_END] = slots[PRODUCERS_LAYOUT] = 0  # as a page of a version before the bound
    slots.flush()
    del slots
    reopened = open_partition(cfg=CONFIG)
    again = reopened.append(_retry(producer, 2))
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert reopened.state.producers_end() >= first.last_offset + 1


def test_a_repair_bounds_what_a_dead_writer_may_have_left_by_the_recovered_log_end(open_partition, partition_dir):
    p = open_partition(cfg=CONFIG)
    p.append(plain(2))
    p.close(clean=False)  # an unclean stop: the next open recovers the tail from the files
    reopened = open_partition(cfg=CONFIG)
    assert reopened.recovered
    assert reopened.state.producers_end() == reopened.snapshot().log_end
