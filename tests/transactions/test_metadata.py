"""A transactional id's state machine and its record, without a broker (Kafka's TransactionMetadata rules)."""

from __future__ import annotations

import pytest

from mmlog.transactions.metadata import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    TxnState,
    decode,
    encode,
)
from mmlog.errors import ConcurrentTransactions, InvalidProducerIdMapping, InvalidTxnState, ProducerFenced
from mmlog.ipc.cluster_view import transaction_partition


def fresh() -> TxnState:
    return TxnState(producer_id=7, producer_epoch=0, timeout_ms=60_000, state=EMPTY, update_ms=1)


def test_a_transaction_goes_empty_ongoing_prepare_complete_and_holds_nothing_after():
    s = fresh().prepare_add(partitions=[("t", 0)], now_ms=10)
    assert (s.state, s.start_ms, s.partitions) == (ONGOING, 10, {("t", 0)})
    s = s.prepare_add(partitions=[("t", 1)], groups=["g"], now_ms=11)
    assert s.partitions == {("t", 0), ("t", 1)} and s.groups == {"g"} and s.start_ms == 10
    assert s.prepare_add(partitions=[("t", 1)], now_ms=12) is None  # nothing new: no write
    s = s.prepare_end(commit=True, now_ms=13)
    assert s.state == PREPARE_COMMIT and s.partitions  # the markers still need the partitions
    s = s.prepare_complete(now_ms=14)
    assert (s.state, s.partitions, s.groups) == (COMPLETE_COMMIT, frozenset(), frozenset())


def test_a_retried_end_of_a_completed_transaction_is_answered_again_but_the_opposite_end_is_refused():
    done = fresh().prepare_add(partitions=[("t", 0)]).prepare_end(commit=False, now_ms=1).prepare_complete(2)
    assert done.state == COMPLETE_ABORT
    assert done.prepare_end(commit=False, now_ms=3) is None
    with pytest.raises(InvalidTxnState):
        done.prepare_end(commit=True, now_ms=3)
    with pytest.raises(InvalidTxnState):
        fresh().prepare_end(commit=True, now_ms=3)  # nothing was begun


def test_an_abort_of_the_next_transaction_begun_while_the_previous_ended_holds_nothing_and_succeeds():
    # librdkafka: commit answered, begin, produce, AddPartitionsToTxn refused (Prepare*), abort at once.
    preparing = fresh().prepare_add(partitions=[("t", 0)]).prepare_end(commit=True, now_ms=1)
    assert preparing.begins_next()
    with pytest.raises(ConcurrentTransactions):
        preparing.prepare_end(commit=False, now_ms=2, next_begun=True)  # wait for the commit's markers
    committed = preparing.prepare_complete(now_ms=3)
    assert committed.prepare_end(commit=False, now_ms=4, next_begun=True) is None  # nothing to write
    assert fresh().prepare_end(commit=False, now_ms=4, next_begun=True) is None
    with pytest.raises(InvalidTxnState):
        committed.prepare_end(commit=False, now_ms=4)  # no next transaction begun: the commit stands
    with pytest.raises(InvalidTxnState):
        fresh().prepare_end(commit=True, now_ms=4, next_begun=True)  # a commit of nothing is still refused


def test_an_add_while_no_transaction_is_ongoing_begins_the_next_one():
    ongoing = fresh().prepare_add(partitions=[("t", 0)])
    assert fresh().begins_next() and not ongoing.begins_next()
    assert ongoing.prepare_end(commit=False, now_ms=1).begins_next()
    assert ongoing.prepare_end(commit=True, now_ms=1).prepare_complete(2).begins_next()


def test_while_markers_are_written_the_id_answers_concurrent_transactions():
    preparing = fresh().prepare_add(partitions=[("t", 0)]).prepare_end(commit=True, now_ms=1)
    for attempt in (lambda: preparing.prepare_add(partitions=[("t", 1)]),
                    lambda: preparing.prepare_end(commit=True, now_ms=2),
                    lambda: preparing.prepare_init(60_000, 2, lambda: 99)):
        with pytest.raises(ConcurrentTransactions):
            attempt()


def test_init_bumps_the_epoch_and_a_new_producer_id_comes_when_the_epoch_is_spent():
    s = fresh().prepare_init(30_000, 5, lambda: 99)
    assert (s.producer_id, s.producer_epoch, s.timeout_ms, s.state) == (7, 1, 30_000, EMPTY)
    renewed = TxnState(7, MAX_EPOCH, 60_000, COMPLETE_COMMIT).prepare_init(60_000, 5, lambda: 99)
    assert (renewed.producer_id, renewed.producer_epoch) == (99, 0)


def test_an_open_transaction_of_a_replaced_producer_is_aborted_at_the_next_epoch():
    s = fresh().prepare_add(partitions=[("t", 0)]).prepare_fence_and_abort(now_ms=9)
    assert (s.state, s.producer_epoch, s.partitions) == (PREPARE_ABORT, 1, {("t", 0)})


def test_only_the_current_producer_and_epoch_may_act():
    s = fresh()
    s.check_producer(7, 0)
    with pytest.raises(InvalidProducerIdMapping):
        s.check_producer(8, 0)
    with pytest.raises(ProducerFenced):
        s.check_producer(7, 1)


def test_the_record_round_trips():
    s = fresh().prepare_add(partitions=[("é-topic", 3), ("b", 0)], groups=["g1", "g2"], now_ms=5)
    assert decode(encode(s)) == s
    with pytest.raises(ValueError):
        decode(b"\x00\x09" + encode(s)[2:])


def test_ids_map_to_partitions_as_kafka_hashes_them():
    # Java: "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's Utils.abs makes 0.
    assert transaction_partition("polygenelubricants", 50) == 0
    assert transaction_partition("a", 50) == 97 % 50  # "a".hashCode() == 97
    assert transaction_partition("ab", 50) == (97 * 31 + 98) % 50
